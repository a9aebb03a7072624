"""TCP connections that send what one reactor pass wrote right after that pass (Netty's
writeAndFlush on its event loop), for the server's and the client's channels.

Twisted's own ``write`` only buffers and asks epoll for writability: two epoll_ctl calls and
another reactor pass per frame, about a third of a cached route lookup's (server) or of a sync
send's (client) CPU. Here the first write of a pass asks for a flush after the pass (a zero-delay
call, which runs before the next poll); the pass's later writes join it, so a pipelined sender
still makes one send(2) per pass. What the socket does not take, or an error, goes to Twisted's
queue, which then writes or fails as it always does; once anything is queued, writes queue behind
it.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from twisted.internet import abstract, tcp

SEND_LIMIT = abstract.FileDescriptor.SEND_LIMIT  # bytes writeSomeData sends at once


class _Held:
    """The client connections written to while writes are held; ``conns`` is None once released
    (a coroutine started meanwhile keeps a copy of the context, and must not add to it later)."""

    __slots__ = ("conns",)

    def __init__(self) -> None:
        self.conns: list[FlushingClient] | None = []


_held: ContextVar[_Held | None] = ContextVar("rmqwire_flushes_held", default=None)


def hold_flushes() -> Token[_Held | None]:
    """From here until ``release_flushes``, a client connection's first write is flushed by the
    release instead of by a zero-delay call: for a known batch of work in one reactor pass (the
    blocking facade's queued sends), which then writes without a timed call per pass (a
    DelayedCall, a heap push and pop: a few us of a sync send). Reactor thread only."""
    return _held.set(_Held())


def release_flushes(token: Token[_Held | None]) -> None:
    """Flush what was written since ``hold_flushes`` (its token); must run in the same context."""
    held = _held.get()
    _held.reset(token)
    if held is None:
        return
    conns, held.conns = held.conns, None
    for conn in conns or ():
        conn._flush_now()


class FlushingWrites:
    """Mixin for a ``tcp.Connection`` subclass; ``_flush_later`` arranges one ``flush`` after the
    current reactor pass."""

    _pending: list[bytes] | None = None
    _pending_bytes = 0

    def _flush_later(self) -> None:
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        conn: Any = self
        if self._pending is not None:
            self._pending.append(data)
            # a long pass (a drain of many queued sends) writes as it goes, one send(2) per
            # SEND_LIMIT (what writeSomeData takes at once): the socket takes it whole, and once
            # it is full, Twisted's queue (then the write gate) sees it during the pass, not after
            self._pending_bytes += len(data)
            if self._pending_bytes >= SEND_LIMIT:
                self.flush()
        elif ((conn._tempDataLen or conn.dataBuffer) and type(data) is bytes and conn.connected
              and not conn._writeDisconnected and not conn.TLS):
            # behind what Twisted's queue holds: its write() but for startWriting, which is on
            # while the queue is not empty (doWrite stops it once empty): no addWriter per frame
            conn._tempDataBuffer.append(data)
            conn._tempDataLen += len(data)
            # a producer paused already (pipelined sends keep the queue past bufferSize) is
            # not paused again per frame: Twisted's doWrite resumes it once the queue drains
            if (conn.producer is not None and not conn.producerPaused
                    and len(conn.dataBuffer) + conn._tempDataLen > conn.bufferSize):
                conn._maybePauseProducer()
        elif (type(data) is not bytes or not data or not conn.connected or conn.disconnecting
              or conn._writeDisconnected or conn.dataBuffer or conn._tempDataLen or conn.TLS):
            super().write(data)  # type: ignore[misc]  # nothing to send, or behind what is queued
        else:
            self._pending = [data]
            self._pending_bytes = len(data)
            self._flush_later()

    def flush(self) -> None:
        conn: Any = self
        pending, self._pending = self._pending, None
        if not pending:
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        if (conn.connected and not conn.disconnecting and not conn._writeDisconnected
                and not conn.dataBuffer and not conn._tempDataLen):
            sent = conn.writeSomeData(data)
            if type(sent) is int and sent > 0:  # else EWOULDBLOCK or an error: the reactor sees to it
                if sent == len(data):
                    return
                data = data[sent:]
        super().write(data)  # type: ignore[misc]

    # writeSequence fills Twisted's queue itself: what is pending goes first. (A close waits for
    # the next doWrite, after the flush, which runs before the next poll.)
    def writeSequence(self, iovec: Any) -> None:  # noqa: N802 - Twisted's interface
        self.flush()
        super().writeSequence(iovec)  # type: ignore[misc]


class FlushingClient(FlushingWrites, tcp.Client):
    """A client connection that flushes each reactor pass's writes after it, and reads up to
    128 KiB at a time (Twisted's 64 KiB is under two pull answers of 32 x 1 KiB messages, each
    read a reactor pass; push drain A/B: 128 KiB was as fast as 256 KiB with less GC time, as
    the answers of one read are decoded together)."""

    bufferSize = 128 * 1024

    def _flush_later(self) -> None:
        held = _held.get()
        if held is not None and held.conns is not None:
            held.conns.append(self)
        else:
            self.reactor.callLater(0, self._flush_now)

    def _flush_now(self) -> None:
        try:
            self.flush()
        except Exception:
            from twisted.logger import Logger

            Logger().failure("flushing {conn} failed", conn=self)


class FlushingConnector(tcp.Connector):
    """``reactor.connectTCP``'s connector, with ``FlushingClient`` connections."""

    def _makeTransport(self) -> tcp.Client:  # noqa: N802 - Twisted's interface
        return FlushingClient(self.host, self.port, self.bindAddress, self, self.reactor)
