"""The blocking Producer end to end on loopback sockets: crochet's reactor thread, an in-process
NameServer and broker (fake_cluster's typed Processors on real RemotingServers)."""

from __future__ import annotations

import concurrent.futures
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_cluster import FakeBroker, FakeNameServer
from held_reactor import held_reactor
from twisted.internet import defer

from rmqwire import Message, MessageQueue, Producer, SendResult, SendStatus
from rmqwire.client import blocking
from rmqwire.client.producer import blocking as producer_blocking
from rmqwire.codec.commands.route import BrokerData, QueueData, TopicRouteData
from rmqwire.codec.message import decode_properties
from rmqwire.errors import (
    MessageIllegalError,
    MQClientError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)
from rmqwire.remoting import RemotingServer
from rmqwire.remoting.config import JAVA_SERVER_CONFIG

ROOT = Path(__file__).resolve().parents[3]
WAIT = 30.0


class LoopbackCluster:
    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.namesrv = FakeNameServer()
        self.broker = FakeBroker("broker-a", 0)
        self.servers = [RemotingServer(reactor, JAVA_SERVER_CONFIG, processors=(p,), port=0)
                        for p in (self.namesrv, self.broker)]
        for s in self.servers:
            s.startService()
        self.broker.port = self.servers[1].port
        self.namesrv_addr = self.servers[0].address

    def add_topic(self, topic: str, queues: int = 4) -> None:
        self.namesrv.routes[topic] = TopicRouteData(
            queue_datas=[QueueData(broker_name="broker-a", read_queue_nums=queues,
                                   write_queue_nums=queues, perm=6)],
            broker_datas=[BrokerData(cluster="c", broker_name="broker-a",
                                     broker_addrs={0: self.broker.addr})],
        )

    def stop(self) -> defer.Deferred[Any]:
        return defer.gatherResults([s.stopService() for s in self.servers])


@pytest.fixture
def cluster() -> Iterator[LoopbackCluster]:
    reactor = blocking.ensure_reactor()
    c = blocking.call(LoopbackCluster, reactor, timeout=WAIT)
    blocking.call(c.add_topic, "T", timeout=WAIT)
    yield c
    blocking.call(c.stop, timeout=WAIT)


def test_context_manager_sends_and_shuts_down(cluster: LoopbackCluster) -> None:
    with Producer("pg", namesrv_addr=cluster.namesrv_addr, client_ip="10.0.0.9") as p:
        m = Message("T", b"hello", tags="TagA", keys=["k1"], properties={"a": "1"})
        r = p.send(m)
        assert isinstance(r, SendResult) and r.status is SendStatus.SEND_OK
        assert r.msg_id == m.unique_key and r.message_queue.topic == "T"
        r = p.send(Message("T", b"q"), queue=MessageQueue("T", "broker-a", 2))
        assert r.message_queue.queue_id == 2
        p.send_oneway(Message("T", b"o"))
        core = p.core
    assert [u.producer_group for u in cluster.broker.unregisters] == ["pg"]
    assert not blocking.call(lambda: core.instance.running, timeout=WAIT)
    props = decode_properties(cluster.broker.sends[0].header.i)
    assert props["a"] == "1" and props["TAGS"] == "TagA"


def test_errors_are_raised_in_the_calling_thread(cluster: LoopbackCluster) -> None:
    with Producer("pg", namesrv_addr=cluster.namesrv_addr) as p:
        with pytest.raises(MQClientError, match="contains illegal characters"):
            p.send(Message("bad topic", b"x"))
        cluster.broker.fail_next = [13]
        with pytest.raises(MessageIllegalError):
            p.send(Message("T", b"x"))
    with pytest.raises(TypeError, match="unknown producer option"):
        Producer("pg", namesrv_addr=cluster.namesrv_addr, no_such_option=1)


def test_many_threads_share_one_producer(cluster: LoopbackCluster) -> None:
    with Producer("pg", namesrv_addr=cluster.namesrv_addr) as p:
        def work(i: int) -> list[str]:
            return [p.send(Message("T", f"{i}-{k}".encode())).msg_id for k in range(20)]

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            ids = [i for batch in pool.map(work, range(16)) for i in batch]
    assert len(ids) == len(set(ids)) == 320
    assert len(cluster.broker.sends) == 320


def test_sync_send_settles_its_waiter_directly_and_a_timed_out_caller_cancels_it(
        cluster: LoopbackCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # the common sync send hands its Waiter to the core (submit_to: no Deferred per send), so
    # the inbox forgets the waiter when the answer settles it, and a caller that gives up before
    # the core's own deadline still drops the pending call (the first attempt's cancel)
    with Producer("pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=3000) as p:
        assert p.send(Message("T", b"first")).status is SendStatus.SEND_OK  # looks the route up
        assert p.send(Message("T", b"warm")).status is SendStatus.SEND_OK  # the direct path
        assert not blocking._inbox._pending
        channel = blocking.call(p.core.instance.open_broker_channel, cluster.broker.addr,
                                timeout=WAIT)
        cluster.broker.hold = True
        monkeypatch.setattr(producer_blocking, "WAIT_SLACK", -2.8)  # the caller waits 0.2 s
        with pytest.raises(blocking.CallTimeoutError, match="Producer.send"):
            p.send(Message("T", b"held"))
        assert blocking.call(lambda: channel.pending_count, timeout=WAIT) == 0
        assert not blocking._inbox._pending
        cluster.broker.hold = False
        monkeypatch.undo()
        assert p.send(Message("T", b"after")).status is SendStatus.SEND_OK
    assert [s.body for s in cluster.broker.sends] == [b"first", b"warm", b"held", b"after"]


def test_a_sync_send_to_a_broker_that_never_answers_times_out_at_its_deadline(
        cluster: LoopbackCluster) -> None:
    # the connection's deadline timer is left where answered calls put it (no cancel per call):
    # it fires early for the held call, re-arms at that call's deadline and fails it there, so
    # the send fails with the core's timeout, well before the blocking caller's own wait ends
    with Producer("pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=300,
                  retry_times_when_send_failed=0) as p:
        for body in (b"first", b"warm", b"warm"):
            assert p.send(Message("T", body)).status is SendStatus.SEND_OK
        channel = blocking.call(p.core.instance.open_broker_channel, cluster.broker.addr,
                                timeout=WAIT)
        cluster.broker.hold = True
        began = time.monotonic()
        with pytest.raises(MQClientError, match=r"Send \[1\] times") as caught:
            p.send(Message("T", b"held"), timeout=1.0)  # the caller waits 1 s + WAIT_SLACK
        cause = caught.value.__cause__  # the core's timer failed the call (Java's error shape)
        assert isinstance(cause, RemotingTimeoutError)
        # the call's timeout is the budget less what the attempt's start cost (Java's
        # timeout - costTime): 1 s, or a few ms under on a busy machine
        waited = re.search(r"timed out after ([0-9.]+) s", str(cause))
        assert waited is not None and 0.9 <= float(waited.group(1)) <= 1.0, str(cause)
        assert time.monotonic() - began >= 1.0 - 0.01  # not before its deadline
        assert blocking.call(lambda: channel.pending_count, timeout=WAIT) == 0
        cluster.broker.hold = False
        assert p.send(Message("T", b"after")).status is SendStatus.SEND_OK


def test_sync_sends_written_by_their_callers_keep_each_threads_order(
        cluster: LoopbackCluster) -> None:
    # a sync send is framed and written in its caller's thread while the reactor waits for I/O
    # (submit_to here=True); a thread's oneway send still queued for the reactor goes first.
    # The broker shares the reactor here, so the callers often find it busy and queue: rounds
    # until some sends were written by their callers
    from twisted.python import threadable

    with Producer("pg", namesrv_addr=cluster.namesrv_addr) as p:
        p.send(Message("T", b"first"))
        core = p.core
        real = core.send_to
        where: list[bool] = []

        def spy(sink: Any, msg: Any) -> Any:
            where.append(threadable.isInIOThread())
            return real(sink, msg)

        core.send_to = spy  # type: ignore[method-assign]

        def work(n: int, r: int) -> list[str]:
            ids = []
            for k in range(12):
                if k % 3 == 0:
                    p.send_oneway(Message("T", f"{r}-{n}-{k:02}-o".encode()))
                ids.append(p.send(Message("T", f"{r}-{n}-{k:02}-s".encode())).msg_id)
            return ids

        ids: list[str] = []
        rounds = 0
        while rounds < 30 and (rounds < 2 or False not in where):
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                ids += [i for b in pool.map(work, range(4), [rounds] * 4) for i in b]
            rounds += 1
        blocking.call(lambda: None, timeout=WAIT)
    assert False in where  # some were written by their callers
    assert len(ids) == len(set(ids)) == rounds * 48
    bodies = [s.body.decode() for s in cluster.broker.sends[1:] if s.body]
    assert len(bodies) == rounds * 64
    for r in range(rounds):
        for n in range(4):
            mine = [b for b in bodies if b.startswith(f"{r}-{n}-")]
            assert mine == [f"{r}-{n}-{k:02}-{kind}" for k in range(12) for kind in "os"
                            if kind == "s" or k % 3 == 0]


def test_a_sync_send_the_socket_takes_in_part_is_finished_by_the_reactor(
        cluster: LoopbackCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # what the caller's write leaves (a small send buffer) goes to Twisted's queue, which the
    # reactor writes once the socket takes more
    import os
    import socket

    from rmqwire.remoting.flushing import FlushingClient

    blocking.ensure_reactor()
    reactor_thread: list[threading.Thread] = []
    blocking.call(lambda: reactor_thread.append(threading.current_thread()), timeout=WAIT)
    left: list[tuple[bool, bool]] = []
    real_flush = FlushingClient.flush

    def flush(self: Any) -> None:
        real_flush(self)
        left.append((threading.current_thread() is not reactor_thread[0],
                     bool(self.dataBuffer or self._tempDataLen)))

    with Producer("pg", namesrv_addr=cluster.namesrv_addr, compress_msg_body_over_howmuch=2**31 - 1,
                  send_msg_timeout=10000) as p:
        p.send(Message("T", b"first"))
        channel = blocking.call(p.core.instance.open_broker_channel, cluster.broker.addr,
                                timeout=WAIT)
        blocking.call(lambda: channel.transport.getHandle().setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4096), timeout=WAIT)
        monkeypatch.setattr(FlushingClient, "flush", flush)
        bodies = [os.urandom(1 << 19) for _ in range(4)]
        for body in bodies:
            assert p.send(Message("T", body)).status is SendStatus.SEND_OK
    assert [s.body for s in cluster.broker.sends[1:]] == bodies
    assert (True, True) in left  # a caller's write left part of a frame to the reactor


def test_send_async_future_and_callback(cluster: LoopbackCluster) -> None:
    done = threading.Event()
    seen: list[Any] = []
    with Producer("pg", namesrv_addr=cluster.namesrv_addr) as p:
        def cb(f: concurrent.futures.Future[SendResult]) -> None:
            seen.append((threading.current_thread().name, f.result()))
            done.set()

        futs = [p.send_async(Message("T", b"a")) for _ in range(50)]
        last = p.send_async(Message("T", b"b"), callback=cb)
        assert all(f.result(WAIT).status is SendStatus.SEND_OK for f in futs)
        assert last.result(WAIT).status is SendStatus.SEND_OK
        assert done.wait(WAIT)
        cluster.broker.fail_next = [13]
        with pytest.raises(MessageIllegalError):
            p.send_async(Message("T", b"c")).result(WAIT)
    (thread, result), = seen
    assert result == last.result() and thread.startswith("PoolThread")  # not the reactor thread


def test_send_oneway_returns_once_queued_within_its_cap(cluster: LoopbackCluster) -> None:
    # as Java's invokeOneway: no wait for the reactor once the route is known, but at most
    # max_inflight_oneway queued; errors Java raises at once (validation, no route) still raise
    reactor = blocking.ensure_reactor()
    with Producer("pg", namesrv_addr=cluster.namesrv_addr, max_inflight_oneway=2,
                  send_msg_timeout=200) as p:
        with pytest.raises(MQClientError, match="No route info"):
            p.send_oneway(Message("Unknown", b"x"))
        p.send(Message("T", b"first"))  # the route is known from here on
        with held_reactor(reactor):
            m = Message("T", b"o1")
            p.send_oneway(m)  # returns while the reactor thread is busy, its id set
            assert m.unique_key
            p.send_oneway(Message("T", b"o2"))
            with pytest.raises(MQClientError, match="body length is zero"):
                p.send_oneway(Message("T", b""))
            with pytest.raises(RemotingTooManyRequestsError):
                p.send_oneway(Message("T", b"o3"))  # the cap: waits 200 ms for a slot
        blocking.call(lambda: None, timeout=WAIT)  # the reactor drained the queue
        p.send(Message("T", b"last"))  # the connection delivers in order
    assert [s.body for s in cluster.broker.sends] == [b"first", b"o1", b"o2", b"last"]
    assert decode_properties(cluster.broker.sends[1].header.i)["UNIQ_KEY"] == m.unique_key


def test_interpreter_exits_with_a_producer_left_running(tmp_path: Path) -> None:
    script = tmp_path / "leave.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(ROOT)!r}, {str(Path(__file__).parent)!r}]
        from rmqwire import Producer, Message
        from rmqwire.client import blocking
        from test_producer_blocking import LoopbackCluster
        reactor = blocking.ensure_reactor()
        c = blocking.call(LoopbackCluster, reactor, timeout=30)
        blocking.call(c.add_topic, "T", timeout=30)
        p = Producer("pg", namesrv_addr=c.namesrv_addr)
        p.start()
        print(p.send(Message("T", b"x")).status.value, flush=True)
        # no shutdown: crochet stops the reactor at exit
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "SEND_OK"
