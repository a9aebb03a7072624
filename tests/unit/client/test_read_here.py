"""A blocking caller that wrote its request itself (the reactor lock held: ``submit_to(...,
here=True)``) waits for and reads its answer too (``blocking._read_here``), and leaves to the
reactor whatever else happens meanwhile.

The peer runs in its own thread on a blocking socket, so it answers while the caller holds the
reactor lock (a peer run by the reactor could not). Every wait ends on a condition; where the
caller may find the reactor busy and queue instead, the test repeats until the case it checks
happened (bounded).
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from held_reactor import held_reactor
from twisted.python.failure import Failure

from rmqwire.client import blocking as facade
from rmqwire.client.blocking import Waiter, submit, submit_to
from rmqwire.codec.frame import FrameDecoder, RemotingCommand, encode_frame
from rmqwire.errors import ConnectionLostError
from rmqwire.remoting.client import RemotingClient

WAIT = 30.0
TRIES = 200
CODE = 1999  # a request code the peer in the thread answers


class ThreadPeer:
    """A remoting peer in its own thread: ``on_request(peer, conn, cmd)`` answers each frame
    (default: an echo of the body); responses to its own requests are kept in ``responses``."""

    def __init__(self, on_request: Callable[[ThreadPeer, socket.socket, RemotingCommand], None] | None = None) -> None:
        self.on_request = on_request or ThreadPeer.echo
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.responses: list[RemotingCommand] = []
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []  # the accepted connections, in order
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self.threads.append(accept)

    @staticmethod
    def echo(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        conn.sendall(encode_frame(cmd.response_to(0, body=cmd.body)))

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                for cmd in decoder.feed(data):
                    if cmd.is_response:
                        self.responses.append(cmd)
                        continue
                    try:
                        self.on_request(self, conn, cmd)
                    except OSError:
                        return
                    except BaseException as e:  # noqa: BLE001 - reported by the test
                        self.errors.append(e)
                        return

    def close(self) -> None:
        self.listener.close()


class Attempt:
    """What the producer's first attempt is to the facade: the channel's receiver, which settles
    the Waiter, and the ``channel`` its answer comes on (``_read_here`` reads it)."""

    def __init__(self, sink: Waiter) -> None:
        self.sink = sink
        self.channel: Any = None
        self.opaque = 0
        self.request: RemotingCommand | None = None
        self.thread: threading.Thread | None = None

    def answered(self, response: RemotingCommand) -> None:
        self.channel = None
        self.thread = threading.current_thread()
        self.sink.ok(response)

    def failed(self, error: Exception) -> None:
        self.channel = None
        self.thread = threading.current_thread()
        self.sink.fail(Failure(error))

    def cancel(self) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            channel.forget(self.opaque)


def _invoke(sink: Waiter, arg: tuple[Any, bytes]) -> None:
    channel, body = arg
    attempt = Attempt(sink)
    sink.attempt = attempt
    attempt.opaque = channel.invoke_direct(RemotingCommand.request(CODE, {"a": "1"}, body), WAIT, attempt)
    attempt.channel = channel


def call_here(channel: Any, body: bytes) -> tuple[RemotingCommand, Attempt]:
    """A call written by this thread when the reactor waits (else queued); its answer and attempt."""
    w = Waiter("read here")
    submit_to(_invoke, (channel, body), sink=w, here=True)
    response = w.wait(WAIT)
    return response, w.attempt


@pytest.fixture
def reactor() -> Any:
    r = facade.ensure_reactor()
    facade.call(lambda: None, timeout=WAIT)  # attached: the reactor lock is on
    assert facade._inbox._direct is not None and facade._inbox._direct.open
    facade._inbox._read_backoff = 0
    yield r
    facade._inbox._read_backoff = 0


@pytest.fixture
def reactor_thread(reactor: Any) -> threading.Thread:
    return facade.call(threading.current_thread, timeout=WAIT)


@pytest.fixture
def client(reactor: Any) -> Iterator[RemotingClient]:
    c = facade.call(RemotingClient, reactor, timeout=WAIT)
    facade.call(c.startService, timeout=WAIT)
    yield c
    facade.call(c.stopService, timeout=WAIT)


def _spy_reads(channel: Any) -> list[tuple[threading.Thread, bytes]]:
    """(thread, bytes) of every dataReceived of ``channel``."""
    reads: list[tuple[threading.Thread, bytes]] = []
    real = channel.dataReceived

    def spy(data: bytes) -> None:
        reads.append((threading.current_thread(), data))
        real(data)

    channel.dataReceived = spy
    return reads


def test_a_caller_reads_its_own_answer_while_the_reactor_waits(
        client: RemotingClient, reactor: Any, reactor_thread: threading.Thread) -> None:
    peer = ThreadPeer()
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        me = threading.current_thread()
        here = 0
        for i in range(TRIES):
            body = f"call {i}".encode()
            response, attempt = call_here(channel, body)
            assert response.body == body and response.is_response
            here += attempt.thread is me
            if here >= 5:
                break
        assert here >= 5  # else the reactor read every answer
        # the socket is back in the reactor's epoll: an answer the caller does not wait for
        with held_reactor(reactor):  # busy: the call queues, the reactor writes and reads it
            w = Waiter("queued")
            submit_to(_invoke, (channel, b"queued"), sink=w, here=True)
        assert w.wait(WAIT).body == b"queued" and w.attempt.thread is reactor_thread
        assert facade.call(lambda: channel.pending_count, timeout=WAIT) == 0
        assert facade.call(lambda: len(facade._inbox._pending), timeout=WAIT) == 0
        assert not peer.errors
    finally:
        peer.close()


#: epoll_wait, epoll_pwait, epoll_pwait2; then poll, ppoll
_EPOLL_WAITS = {"x86_64": {232, 281, 441}, "aarch64": {22, 441}}.get(platform.machine())
_POLLS = {"x86_64": {7, 271}, "aarch64": {73}}.get(platform.machine())
needs_proc = pytest.mark.skipif(_EPOLL_WAITS is None or not os.path.exists("/proc/self/task"),
                                reason="reads a thread's syscall from /proc (Linux x86_64/aarch64)")


def _syscall(native_id: int) -> int:
    with open(f"/proc/self/task/{native_id}/syscall") as f:
        first = f.read().split()[0]
    return int(first) if first.isdigit() else -1


def _in_epoll_wait(native_id: int) -> bool:
    return _syscall(native_id) in _EPOLL_WAITS  # type: ignore[operator]


def _waiting(native_id: int) -> bool:
    """In its own epoll's wait (reading its answer) or in its Waiter's poll (the reactor reads)."""
    call = _syscall(native_id)
    return call in _EPOLL_WAITS or call in _POLLS  # type: ignore[operator]


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.0005)


class _EpollSpy:
    """The reactor's epoll, noting each wait as (started, events)."""

    def __init__(self, epoll: Any) -> None:
        self.epoll = epoll
        self.waits: list[tuple[float, list[tuple[int, int]]]] = []

    def poll(self, *a: Any) -> Any:
        began = time.monotonic()
        events = self.epoll.poll(*a)
        self.waits.append((began, events))
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self.epoll, name)

    def woke_on(self, fd: int) -> list[float]:
        return [began for began, events in self.waits if any(f == fd for f, _ in events)]


@contextlib.contextmanager
def _spied_epoll(reactor: Any) -> Iterator[_EpollSpy]:
    unlocked = facade.call(lambda: reactor._poller, timeout=WAIT)
    epoll = unlocked._poller
    spy = _EpollSpy(epoll)
    facade.call(setattr, unlocked, "_poller", spy, timeout=WAIT)  # the reactor's next waits
    try:
        yield spy
    finally:
        facade.call(setattr, unlocked, "_poller", epoll, timeout=WAIT)


@needs_proc
def test_an_answer_that_comes_while_the_caller_waits_does_not_wake_the_reactor(
        client: RemotingClient, reactor: Any) -> None:
    # the caller's epoll holds the socket ahead of the reactor's, both EPOLLEXCLUSIVE: the kernel
    # wakes the caller only (a reactor woken would wait for the lock and hold it when the
    # caller's next send came, which then queued)
    caller_id: list[int] = []

    def when_waiting(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        _until(lambda: _waiting(caller_id[0]))
        ThreadPeer.echo(peer, conn, cmd)

    peer = ThreadPeer(when_waiting)
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        fd = facade.call(channel.transport.fileno, timeout=WAIT)
        me = threading.current_thread()
        caller_id.append(threading.get_native_id())
        with _spied_epoll(reactor) as spy:
            here = 0
            for i in range(TRIES):
                facade.call(lambda: None, timeout=WAIT)  # a reactor pass: its waits so far noted
                before = len(spy.waits)
                response, attempt = call_here(channel, f"wait {i}".encode())
                assert response.body == f"wait {i}".encode()
                if attempt.thread is me:
                    here += 1
                    facade.call(lambda: None, timeout=WAIT)
                    woke = [e for _, events in spy.waits[before:] for e in events]
                    assert [e for e in woke if e[0] == fd] == []
                    if here >= 5:
                        break
            assert here >= 5
        assert not peer.errors
    finally:
        peer.close()


def test_a_watched_socket_takes_the_reactors_writer_changes(client: RemotingClient, reactor: Any) -> None:
    # epoll cannot modify an EPOLLEXCLUSIVE registration: Twisted's addWriter / removeWriter of a
    # watched socket (writes queued when it is full) delete and add it again, still exclusive
    peer = ThreadPeer()
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        me = threading.current_thread()
        for i in range(TRIES):
            if call_here(channel, b"w")[1].thread is me:
                break
        fd = facade.call(channel.transport.fileno, timeout=WAIT)
        unlocked = facade.call(lambda: reactor._poller, timeout=WAIT)
        assert fd in unlocked.watches
        transport = channel.transport
        def writer_on_and_off() -> bool:
            reactor.addWriter(transport)
            on = fd in reactor._writes
            reactor.removeWriter(transport)
            return on

        assert facade.call(writer_on_and_off, timeout=WAIT)
        facade.call(reactor.addWriter, transport, timeout=WAIT)  # nothing to write: the reactor
        facade.call(lambda: None, timeout=WAIT)  # finds it writable and stops writing
        assert fd in unlocked.watches and fd not in facade.call(lambda: reactor._writes, timeout=WAIT)
        here = sum(call_here(channel, f"after {k}".encode())[1].thread is me for k in range(20))
        assert here > 0
        facade.call(reactor.removeReader, transport, timeout=WAIT)  # unregistered: forgotten
        assert fd not in unlocked.watches
        facade.call(reactor.addReader, transport, timeout=WAIT)
        assert call_here(channel, b"again")[0].body == b"again"
        assert not peer.errors
    finally:
        peer.close()


def test_an_answer_that_comes_before_the_callers_wait_is_read_by_the_caller(
        client: RemotingClient, reactor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # a caller preempted between its write and its wait (a busy core): the answer is there
    # before it waits (the reactor may be woken for it, as nobody waited then): the caller still
    # reads it, and its next sends still read theirs (no back-off, as after other I/O)
    answered = threading.Event()

    def echo(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        ThreadPeer.echo(peer, conn, cmd)
        answered.set()

    peer = ThreadPeer(echo)
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        fd = facade.call(channel.transport.fileno, timeout=WAIT)
        me = threading.current_thread()
        real = facade._read_here

        def late(*a: Any) -> int:
            # the answer is on the socket before the caller waits for it
            assert answered.wait(WAIT)
            assert select.select([fd], [], [], WAIT)[0] == [fd]
            return real(*a)

        monkeypatch.setattr(facade, "_read_here", late)
        for i in range(TRIES):
            answered.clear()
            facade._inbox._read_backoff = 0
            response, attempt = call_here(channel, f"late {i}".encode())
            assert response.body == f"late {i}".encode()
            if attempt.thread is me:
                break
        assert attempt.thread is me and facade._inbox._read_backoff == 0
        assert not peer.errors
    finally:
        peer.close()


@needs_proc
def test_a_request_of_the_peer_between_two_calls_wakes_the_reactor_at_once(
        client: RemotingClient, reactor: Any, reactor_thread: threading.Thread) -> None:
    # nobody waits in the caller's epoll between its calls: the reactor's wait in progress ends
    # for the request (not its next timer), and the reactor answers it
    peer = ThreadPeer()
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        fd = facade.call(channel.transport.fileno, timeout=WAIT)
        me = threading.current_thread()
        reactor_id = facade.call(threading.get_native_id, timeout=WAIT)
        for i in range(TRIES):
            response, attempt = call_here(channel, f"first {i}".encode())
            if attempt.thread is me:
                break
        assert attempt.thread is me  # the socket is watched by the caller's epoll too
        (conn,) = peer.conns
        with _spied_epoll(reactor) as spy:
            facade.call(lambda: None, timeout=WAIT)  # the spy is in place for the next wait
            for k in range(TRIES):
                _until(lambda: _in_epoll_wait(reactor_id))
                sent = time.monotonic()
                # a request of the broker's own (as CHECK_TRANSACTION_STATE), no call pending
                conn.sendall(encode_frame(RemotingCommand.request(4242, {"x": "y"}, opaque=9001 + k)))
                _until(lambda: any(r.opaque == 9001 + k for r in peer.responses))  # noqa: B023
                # the wait that returned the socket began before the request was sent (it may
                # have ended for something else just before: then again)
                if [began for began in spy.woke_on(fd) if began < sent]:
                    break
                del spy.waits[:]
            assert [began for began in spy.woke_on(fd) if began < sent]
        assert not peer.errors
    finally:
        peer.close()


def _split_answer(first_read: threading.Event, go_on: threading.Event) -> Callable[..., None]:
    def answer(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        frame = encode_frame(cmd.response_to(0, body=cmd.body))
        conn.sendall(frame[:20])
        assert first_read.wait(WAIT)
        assert go_on.wait(WAIT)
        first_read.clear()  # before the rest: the test's next call sets them again after it
        go_on.clear()
        conn.sendall(frame[20:])

    return answer


def _split_channel(client: RemotingClient, peer: ThreadPeer, first_read: threading.Event
                   ) -> tuple[Any, list[tuple[threading.Thread, bytes]]]:
    """A channel to ``peer`` whose reads are spied on and set ``first_read`` once handled."""
    channel = facade.call(client.channel, peer.addr, timeout=WAIT)
    reads = _spy_reads(channel)
    real = channel.dataReceived

    def read(data: bytes) -> None:
        real(data)
        first_read.set()

    channel.dataReceived = read
    return channel, reads


def test_an_answer_in_two_parts_is_read_whole_by_the_caller(
        client: RemotingClient, reactor_thread: threading.Thread) -> None:
    first_read, go_on = threading.Event(), threading.Event()
    go_on.set()  # the rest follows as soon as the first part was read
    peer = ThreadPeer(_split_answer(first_read, go_on))
    try:
        channel, reads = _split_channel(client, peer, first_read)
        me = threading.current_thread()
        for i in range(TRIES):
            go_on.set()
            del reads[:]
            body = f"split {i}".encode()
            response, attempt = call_here(channel, body)
            assert response.body == body
            if attempt.thread is me and len(reads) == 2:
                break
        # the partial frame stayed in the connection's buffer between the caller's two reads
        assert attempt.thread is me and [t for t, _ in reads] == [me, me]
        assert not peer.errors
    finally:
        peer.close()


def test_the_rest_of_an_answer_after_the_callers_wait_is_read_by_the_reactor(
        client: RemotingClient, reactor_thread: threading.Thread,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facade, "READ_HERE_LIMIT", 0.02)
    first_read, go_on = threading.Event(), threading.Event()
    peer = ThreadPeer(_split_answer(first_read, go_on))
    try:
        channel, reads = _split_channel(client, peer, first_read)
        me = threading.current_thread()
        for i in range(TRIES):
            del reads[:]
            body = f"late {i}".encode()
            w = Waiter("late rest")
            submit_to(_invoke, (channel, body), sink=w, here=True)
            # run_here has returned: the caller's wait is over, the rest comes now
            go_on.set()
            response = w.wait(WAIT)
            assert response.body == body
            if reads and reads[0][0] is me:
                break
        assert [t for t, _ in reads] == [me, reactor_thread]
        assert w.attempt.thread is reactor_thread
        assert not peer.errors
    finally:
        peer.close()


def test_a_request_of_the_peer_before_the_answer_is_answered_by_the_caller(
        client: RemotingClient) -> None:
    def ask_first(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        # a request of the broker's own (as CHECK_TRANSACTION_STATE) on the same connection
        conn.sendall(encode_frame(RemotingCommand.request(4242, {"x": "y"}, opaque=len(peer.responses) + 7000))
                     + encode_frame(cmd.response_to(0, body=cmd.body)))

    peer = ThreadPeer(ask_first)
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        reads = _spy_reads(channel)
        me = threading.current_thread()
        for i in range(TRIES):
            del reads[:]
            body = f"asked {i}".encode()
            response, attempt = call_here(channel, body)
            assert response.body == body
            if attempt.thread is me:
                break
        assert attempt.thread is me and reads[0][0] is me
        # its answer (no processor for it: REQUEST_CODE_NOT_SUPPORTED) was written at the end
        deadline = time.monotonic() + WAIT
        while len(peer.responses) < i + 1 and time.monotonic() < deadline:
            facade.call(lambda: None, timeout=WAIT)  # a reactor pass; the peer's thread reads
        assert [r.opaque for r in peer.responses] == [7000 + k for k in range(i + 1)]
        assert {r.code for r in peer.responses} == {3}
        assert not peer.errors
    finally:
        peer.close()


def test_a_connection_closed_instead_of_an_answer_fails_the_call(
        client: RemotingClient, reactor: Any) -> None:
    def hang_up(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        if cmd.body == b"ok":  # the connection's first call (it arms the deadline timer)
            ThreadPeer.echo(peer, conn, cmd)
            return
        conn.shutdown(socket.SHUT_RDWR)
        raise OSError("closed")

    peer = ThreadPeer(hang_up)
    try:
        me = threading.current_thread()
        for _ in range(TRIES):
            channel = facade.call(client.channel, peer.addr, timeout=WAIT)
            fd = facade.call(channel.transport.fileno, timeout=WAIT)
            assert call_here(channel, b"ok")[0].body == b"ok"
            w = Waiter("hung up")
            submit_to(_invoke, (channel, b"x"), sink=w, here=True)
            with pytest.raises(ConnectionLostError):
                w.wait(WAIT)
            assert not facade.call(lambda: channel.connected, timeout=WAIT)
            assert facade.call(lambda: channel.transport.fileno() == -1 or fd not in reactor._reads,
                               timeout=WAIT)
            if w.attempt.thread is me:
                break
        assert w.attempt.thread is me  # the caller read the end and failed its own call
    finally:
        peer.close()


def test_the_callers_wait_ends_at_the_reactors_next_timer(
        client: RemotingClient, reactor: Any, reactor_thread: threading.Thread,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a wait not bounded by the timer would hold the lock for READ_HERE_LIMIT; the peer answers
    # only once the timer ran
    monkeypatch.setattr(facade, "READ_HERE_LIMIT", WAIT)
    fired = threading.Event()

    def after_the_timer(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        assert fired.wait(WAIT)
        ThreadPeer.echo(peer, conn, cmd)

    peer = ThreadPeer(after_the_timer)
    entered: list[int] = []
    real = facade._read_here
    monkeypatch.setattr(facade, "_read_here", lambda *a: entered.append(1) or real(*a))
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        for i in range(TRIES):
            fired.clear()
            facade.call(reactor.callLater, 0.02, fired.set, timeout=WAIT)
            began = time.monotonic()
            response, attempt = call_here(channel, f"timer {i}".encode())
            assert fired.is_set() and time.monotonic() - began < WAIT / 3
            if entered:
                break
        assert entered and attempt.thread is reactor_thread
        assert not peer.errors
    finally:
        peer.close()


def test_other_io_ends_the_callers_wait_and_later_sends_leave_answers_to_the_reactor(
        client: RemotingClient, reactor_thread: threading.Thread,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a call another thread queues meanwhile rings the inbox bell: the caller stops waiting at
    # once (else the queued call, which the peer waits for, would wait READ_HERE_LIMIT)
    monkeypatch.setattr(facade, "READ_HERE_LIMIT", WAIT)
    got, other_ran = threading.Event(), threading.Event()

    def after_the_other(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        got.set()
        assert other_ran.wait(WAIT)
        ThreadPeer.echo(peer, conn, cmd)

    peer = ThreadPeer(after_the_other)
    entered: list[int] = []
    real = facade._read_here
    monkeypatch.setattr(facade, "_read_here", lambda *a: entered.append(1) or real(*a))
    try:
        channel = facade.call(client.channel, peer.addr, timeout=WAIT)
        ran_in: list[threading.Thread] = []
        for i in range(TRIES):
            got.clear()
            other_ran.clear()
            del entered[:]
            facade._inbox._read_backoff = 0
            out: list[Any] = []
            began = time.monotonic()
            caller = threading.Thread(target=lambda: out.append(call_here(channel, f"o {i}".encode())))
            caller.start()
            assert got.wait(WAIT)

            class Sink:
                def ok(self, _: Any) -> None:
                    pass

                def fail(self, f: Failure) -> None:
                    pass

            submit(lambda: (ran_in.append(threading.current_thread()), other_ran.set()), sink=Sink())
            caller.join(WAIT)
            assert not caller.is_alive() and time.monotonic() - began < WAIT / 3
            assert out[0][0].body == f"o {i}".encode()
            if entered:
                break
        assert entered and ran_in[-1] is reactor_thread
        assert out[0][1].thread is reactor_thread
        assert facade._inbox._read_backoff == facade.READ_HERE_BACKOFF  # then left to the reactor
        assert not peer.errors
    finally:
        peer.close()


def test_threads_calling_at_once_each_get_their_own_answer(client: RemotingClient) -> None:
    # callers on two connections, answers sometimes in two parts and late: every answer reaches
    # its own caller, whoever read it, and nothing stays pending
    rnd = random.Random(7)
    lock = threading.Lock()

    def answer(peer: ThreadPeer, conn: socket.socket, cmd: RemotingCommand) -> None:
        frame = encode_frame(cmd.response_to(0, body=cmd.body))
        with lock:
            split = rnd.random() < 0.3
        if split:  # two writes: the caller may read the first part alone
            conn.sendall(frame[:9])
        conn.sendall(frame[9:] if split else frame)

    peers = [ThreadPeer(answer), ThreadPeer(answer)]
    try:
        channels = [facade.call(client.channel, p.addr, timeout=WAIT) for p in peers]
        me_read = [0]

        def work(n: int) -> list[bytes]:
            got = []
            for k in range(150):
                body = f"{n}-{k}".encode()
                response, attempt = call_here(channels[n % 2], body)
                got.append(response.body)
                if attempt.thread is threading.current_thread():
                    with lock:
                        me_read[0] += 1
            return got

        threads_out: dict[int, list[bytes]] = {}
        workers = [threading.Thread(target=lambda n=n: threads_out.__setitem__(n, work(n))) for n in range(4)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(WAIT * 4)
        assert all(not t.is_alive() for t in workers)
        assert threads_out == {n: [f"{n}-{k}".encode() for k in range(150)] for n in range(4)}
        assert facade.call(lambda: [c.pending_count for c in channels], timeout=WAIT) == [0, 0]
        assert facade.call(lambda: len(facade._inbox._pending), timeout=WAIT) == 0
        assert not any(p.errors for p in peers)
    finally:
        for p in peers:
            p.close()
