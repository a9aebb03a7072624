"""Client and server over real loopback sockets, on the global reactor.

Each scenario runs in the reactor thread through the blocking facade (crochet), the same way
whether this test starts the reactor thread or another test (the facade's own tests) already
did: one pytest process holds them all. Each builds and starts a server and a client, stops both
(the Service lifecycle), then checks what trial's janitor would: no socket or delayed call of
its own is left in the reactor.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from twisted.internet import defer, task, threads
from twisted.internet.defer import Deferred
from twisted.internet.protocol import ServerFactory

from rmqwire.client.blocking import Waiter, call, submit
from rmqwire.codec import RemotingCommand, RequestCode, SerializeType
from rmqwire.errors import ConnectionLostError, RemotingConnectError
from rmqwire.remoting import (
    Dispatcher,
    RemotingClient,
    RemotingConfig,
    RemotingServer,
    RequestContext,
)
from rmqwire.remoting.flushing import hold_flushes, release_flushes

BIG = bytes(range(256)) * 4096  # 1 MiB: many TCP segments in both directions
SCENARIO_TIMEOUT = 60.0  # a bound, not a pace: the shared 2-core machine is noisy


def echo(cmd: RemotingCommand, ctx: RequestContext) -> RemotingCommand:
    return cmd.response_to(0, remark="echo", body=cmd.body)


@dataclasses.dataclass
class Loopback:
    reactor: Any
    server: RemotingServer
    client: RemotingClient
    addr: str


Scenario = Callable[[Loopback], Awaitable[None]]


def _reactor_state(reactor: Any) -> tuple[set[Any], set[Any]]:
    """Selectables, and the functions of pending delayed calls (a LoopingCall, such as crochet's
    process reaper, keeps one function while its DelayedCall changes at each run)."""
    selectables = set(reactor.getReaders()) | set(reactor.getWriters())
    return selectables, {id(c.func) for c in reactor.getDelayedCalls() if c.active()}


async def _in_reactor(scenario: Scenario) -> None:
    from twisted.internet import reactor  # the real reactor: this module's whole point

    selectables_before, calls_before = _reactor_state(reactor)
    server = RemotingServer(
        reactor,
        RemotingConfig(response_serialize_type=SerializeType.JSON),
        dispatcher=Dispatcher({105: echo}),
    )
    server.startService()
    client = RemotingClient(reactor, RemotingConfig(serialize_type=SerializeType.ROCKETMQ))
    client.startService()
    try:
        await scenario(Loopback(reactor, server, client, server.address))
    finally:
        # the client stops first, then the server waits for its side to go
        await client.stopService()
        await server.stopService()
    await task.deferLater(reactor, 0, lambda: None)  # one turn: let what stopping ran settle
    selectables, calls = _reactor_state(reactor)
    new = calls - calls_before
    left = [c for c in reactor.getDelayedCalls() if c.active() and id(c.func) in new]
    assert (selectables - selectables_before, left) == (set(), []), "dirty reactor"


def run_loopback(scenario: Scenario) -> None:
    call(_in_reactor, scenario, timeout=SCENARIO_TIMEOUT)


def test_round_trip_large_bodies_and_callback() -> None:
    async def scenario(lb: Loopback) -> None:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, BIG)
        calls = [lb.client.invoke(lb.addr, cmd, 10.0) for _ in range(3)]
        results = await defer.gatherResults(calls)
        for resp in results:
            assert (resp.code, resp.remark, resp.body) == (0, "echo", BIG)
            assert resp.serialize_type == SerializeType.JSON  # 5.x mode: server's own type
        # the server calls the client back over the client's own connection
        lb.client.register_processor(307, lambda c, x: c.response_to(0, remark="running"))
        (to_client,) = lb.server.channels
        resp = await to_client.invoke(RemotingCommand.request(307), 10.0)
        assert resp.remark == "running"

    run_loopback(scenario)


def test_responses_written_at_once_keep_their_order() -> None:
    """The server's connections send a reactor pass's responses right after it, straight to the
    socket when nothing is queued; a response the socket takes only part of is queued, and so is
    every response after it until it drains."""
    from rmqwire.remoting.server import _FlushingServer

    async def scenario(lb: Loopback) -> None:
        sizes = [0, 10, len(BIG), 3, len(BIG) // 3, 0, 70_000, 1] * 3
        bodies = [BIG[:n] or None for n in sizes]
        calls = [lb.client.invoke(lb.addr, RemotingCommand.request(105, {"topic": "T"}, body), 30.0)
                 for body in bodies]
        results = await defer.gatherResults(calls)
        assert [r.body for r in results] == bodies
        (server_side,) = lb.server.channels
        assert isinstance(server_side.transport, _FlushingServer)

    run_loopback(scenario)


def test_client_requests_written_after_the_pass_keep_their_order() -> None:
    """The client's connections too send a reactor pass's requests right after it (one send for
    a pipelined burst); a request the socket takes only part of is queued, and every one after
    it until it drains."""
    from rmqwire.remoting.flushing import FlushingClient

    async def scenario(lb: Loopback) -> None:
        await lb.client.invoke(lb.addr, RemotingCommand.request(105), 10.0)  # connected
        (client_side,) = lb.client.channels.values()
        assert isinstance(client_side.transport, FlushingClient)
        small = [lb.client.invoke(lb.addr, RemotingCommand.request(105, {"topic": "T"}, body), 30.0)
                 for body in [b"a", None, BIG[:70_000], b"b"]]
        assert client_side.transport._pending  # nothing sent inside the pass
        assert [r.body for r in await defer.gatherResults(small)] == [b"a", None, BIG[:70_000], b"b"]
        # a pass that writes more than SEND_LIMIT sends as it goes (at most SEND_LIMIT held)
        sizes = [0, 10, len(BIG), 3, len(BIG) // 3, 0, 70_000, 1] * 3
        bodies = [BIG[:n] or None for n in sizes]
        calls = [lb.client.invoke(lb.addr, RemotingCommand.request(105, {"topic": "T"}, body), 30.0)
                 for body in bodies]
        results = await defer.gatherResults(calls)
        assert [r.body for r in results] == bodies

    run_loopback(scenario)


def _flush_calls(reactor: Any) -> list[Any]:
    return [c for c in reactor.getDelayedCalls()
            if c.active() and getattr(c.func, "__name__", "") == "_flush_now"]


def test_held_flushes_are_sent_on_release_and_a_later_copy_of_the_context_flushes_as_usual() -> None:
    """While flushes are held a client connection's writes make no zero-delay call; the release
    sends them, in order. A context copied during the hold (what a coroutine started then keeps)
    writes as usual after the release: its writes must not join the released hold."""

    async def scenario(lb: Loopback) -> None:
        await lb.client.invoke(lb.addr, RemotingCommand.request(105), 10.0)  # connected
        (client_side,) = lb.client.channels.values()
        bodies = [b"one", BIG[:100_000], None, b"four"]  # under SEND_LIMIT: all held
        flushes_before = len(_flush_calls(lb.reactor))
        held = hold_flushes()
        try:
            calls = [lb.client.invoke(lb.addr, RemotingCommand.request(105, {"topic": "T"}, body), 10.0)
                     for body in bodies]
            assert client_side.transport._pending  # nothing sent yet
            assert len(_flush_calls(lb.reactor)) == flushes_before
            started_meanwhile = contextvars.copy_context()
        finally:
            release_flushes(held)
        assert not client_side.transport._pending  # sent, or queued to Twisted's buffer
        assert [r.body for r in await defer.gatherResults(calls)] == bodies
        late = started_meanwhile.run(
            lb.client.invoke, lb.addr, RemotingCommand.request(105, {"topic": "T"}, b"late"), 5.0)
        assert (await late).body == b"late"  # a write lost in the released hold would time out

    run_loopback(scenario)


def test_held_writes_past_send_limit_are_sent_during_the_hold_in_order() -> None:
    """A long held pass (a drain of many queued sends) sends each SEND_LIMIT it writes at once,
    without a zero-delay call: at most SEND_LIMIT bytes wait for the release, so a full socket
    shows in Twisted's queue (and the write gate) during the pass, not after it."""
    from rmqwire.remoting.flushing import SEND_LIMIT

    async def scenario(lb: Loopback) -> None:
        await lb.client.invoke(lb.addr, RemotingCommand.request(105), 10.0)  # connected
        transport = next(iter(lb.client.channels.values())).transport
        sent: list[int] = []
        write_some = transport.writeSomeData

        def counted(data: Any) -> Any:
            sent.append(len(data))
            return write_some(data)

        transport.writeSomeData = counted
        bodies = [bytes([i % 256]) * 20_000 for i in range(40)] + [BIG, b"last"]  # ~1.8 MB
        flushes_before = len(_flush_calls(lb.reactor))
        held = hold_flushes()
        try:
            calls = []
            for body in bodies:
                calls.append(lb.client.invoke(lb.addr, RemotingCommand.request(105, {"topic": "T"}, body), 30.0))
                assert transport._pending_bytes < SEND_LIMIT or transport._pending is None
            assert sent  # sent during the hold
            assert len(_flush_calls(lb.reactor)) == flushes_before
        finally:
            release_flushes(held)
        del transport.writeSomeData
        assert [r.body for r in await defer.gatherResults(calls)] == bodies

    run_loopback(scenario)


def test_writes_behind_twisted_queue_join_it_without_addwriter_and_pause_the_producer() -> None:
    """A frame written while Twisted's queue holds data goes straight to that queue (writing is
    on until it is empty): no addWriter per frame; it is sent in order, and the producer is
    paused once the queue passes bufferSize, as Twisted's own write does (once: not again per
    frame while it is paused)."""

    async def scenario(lb: Loopback) -> None:
        await lb.client.invoke(lb.addr, RemotingCommand.request(105), 10.0)  # connected
        transport = next(iter(lb.client.channels.values())).transport
        paused: list[bool] = []

        class Producer:
            def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
                paused.append(True)

            def resumeProducing(self) -> None:  # noqa: N802 - Twisted's interface
                paused.append(False)

            def stopProducing(self) -> None:  # noqa: N802 - Twisted's interface
                pass

        if transport.producer is not None:
            transport.unregisterProducer()
        transport.registerProducer(Producer(), True)
        added: list[Any] = []
        add_writer = lb.reactor.addWriter
        lb.reactor.addWriter = lambda w: (added.append(w), add_writer(w))[1]
        try:
            first = lb.client.invoke(lb.addr, RemotingCommand.request(105, {"topic": "T"}, BIG[:200_000]), 30.0)
            transport.flush()  # one send(2) takes 128 KiB at most: the rest is in Twisted's queue
            assert (transport._tempDataLen or transport.dataBuffer) and not paused
            queued_before = len(added)
            bodies = [bytes([i]) * 30_000 for i in range(8)]  # past bufferSize on top of the rest
            calls = [lb.client.invoke(lb.addr, RemotingCommand.request(105, {"topic": "T"}, b), 30.0)
                     for b in bodies]
            assert len(added) == queued_before  # no addWriter for the frames behind the queue
            # paused once: a frame written while paused does not pause it again
            assert transport._pending is None and paused == [True]
        finally:
            del lb.reactor.addWriter
        assert [r.body for r in await defer.gatherResults([first, *calls])] == [BIG[:200_000], *bodies]
        transport.unregisterProducer()

    run_loopback(scenario)


def test_calls_queued_by_other_threads_are_sent_when_the_drain_ends() -> None:
    """The blocking facade's drain holds flushes: a call queued by another thread writes without
    a zero-delay call, and its request is sent when the drain ends."""
    seen: list[tuple[bool, int]] = []

    async def scenario(lb: Loopback) -> None:
        await lb.client.invoke(lb.addr, RemotingCommand.request(105), 10.0)  # connected
        (client_side,) = lb.client.channels.values()

        def in_the_drain() -> Deferred[RemotingCommand]:
            before = len(_flush_calls(lb.reactor))
            d = client_side.invoke(RemotingCommand.request(105, {"topic": "T"}, b"queued"), 10.0)
            seen.append((bool(client_side.transport._pending), len(_flush_calls(lb.reactor)) - before))
            return d

        def caller() -> RemotingCommand:
            waiter = Waiter("queued call")
            submit(in_the_drain, sink=waiter)
            return waiter.wait(10.0)  # type: ignore[no-any-return]

        resp = await threads.deferToThread(caller)
        assert resp.body == b"queued" and seen == [(True, 0)]

    run_loopback(scenario)


@pytest.mark.parametrize("writer", ["client", "server"])
def test_what_was_written_before_a_close_is_sent(writer: str) -> None:
    """Writes wait for the end of the reactor pass; closing in the same pass sends them first,
    on either side's connections."""

    async def scenario(lb: Loopback) -> None:
        got: list[bytes | None] = []
        arrived: Deferred[None] = Deferred()

        def on_request(cmd: RemotingCommand, ctx: RequestContext) -> None:
            got.append(cmd.body)
            if len(got) == 3:
                arrived.callback(None)

        # the receiving side gets the oneways; an unknown code connects without a processor
        if writer == "client":
            lb.server.dispatcher.register(307, on_request)
        else:
            lb.client.register_processor(307, on_request)
        resp = await lb.client.invoke(lb.addr, RemotingCommand.request(4242), 10.0)
        assert resp.code == 3
        (channel,) = lb.client.channels.values() if writer == "client" else lb.server.channels
        for body in (b"one", BIG, b"three"):
            channel.invoke_oneway(RemotingCommand.request(307, body=body))
        channel.close()
        await arrived
        assert got == [b"one", BIG, b"three"]

    run_loopback(scenario)


def test_unknown_code_and_server_drop() -> None:
    async def scenario(lb: Loopback) -> None:
        resp = await lb.client.invoke(lb.addr, RemotingCommand.request(4242), 10.0)
        assert (resp.code, resp.remark) == (3, " request type 4242 not supported")
        hang: Deferred[RemotingCommand] = Deferred()
        lb.server.dispatcher.register(106, lambda c, x: hang)
        pending = lb.client.invoke(lb.addr, RemotingCommand.request(106), 10.0)
        await lb.client.invoke(lb.addr, RemotingCommand.request(4242), 10.0)  # 106 has arrived
        (server_side,) = lb.server.channels
        server_side.close()
        with pytest.raises(ConnectionLostError):
            await pending
        hang.callback(RemotingCommand(code=0))  # too late: dropped with a log line
        resp = await lb.client.invoke(lb.addr, RemotingCommand.request(4242), 10.0)
        assert resp.code == 3  # reconnected on demand

    run_loopback(scenario)


def test_connect_refused() -> None:
    async def scenario(lb: Loopback) -> None:
        port = lb.reactor.listenTCP(0, ServerFactory(), interface="127.0.0.1")
        free = port.getHost().port
        await port.stopListening()
        with pytest.raises(RemotingConnectError):
            await lb.client.invoke(f"127.0.0.1:{free}", RemotingCommand.request(105), 5.0)

    run_loopback(scenario)


def test_dirty_reactor_is_reported() -> None:
    # the janitor check above can fail: a scenario leaving a timer behind is caught
    leaked: list[Any] = []

    async def scenario(lb: Loopback) -> None:
        leaked.append(lb.reactor.callLater(3600, lambda: None))

    try:
        with pytest.raises(AssertionError, match="dirty reactor"):
            run_loopback(scenario)
    finally:
        call(lambda: [c.cancel() for c in leaked if c.active()], timeout=SCENARIO_TIMEOUT)
