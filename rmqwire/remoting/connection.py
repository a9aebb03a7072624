"""Sans-IO remoting connection: frame reassembly, opaques, and every pending call's state.

No sockets, no clock, no Twisted (cf. h11's ``Connection``): bytes go in through ``receive_data``
and come out of ``send_request``/``send_response``; deadlines are plain numbers supplied by the
caller. The connection owns the pending-call table: ``next_deadline()`` tells the caller when to
look again, ``expire(now)`` hands back the calls whose deadline passed, ``close()`` the rest.
A framing error is an event (``ProtocolFailed``) after the good frames before it; from then on
every request, and after ``close()`` every send, fails at once with LocalProtocolError (requests
that arrived before the bad bytes may still be answered until close(), as h11 lets a server answer
after a RemoteProtocolError).
Spec: shared/spec/wire-format.md sections 1 and 4.
"""

from __future__ import annotations

import dataclasses
import enum
import heapq
import re
import struct
from typing import Any

from rmqwire.codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, SerializeType
from rmqwire.codec.frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    PreparedRequest,
    RemotingCommand,
    encode_frame,
)
from rmqwire.codec.header_scan import FLAG, OPAQUE, scan_json_header, scanned_command
from rmqwire.errors import (
    CodecError,
    LocalProtocolError,
    RemoteProtocolError,
    RemotingTooManyRequestsError,
)

_HEADER_WORD = struct.Struct(">i")
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
#: How far a call's deadline may fall before the latest one sent while the pending calls are
#: still walked in send order (a send's budget less the milliseconds it took to get going).
ORDER_SLACK = 0.01
_NEVER = float("-inf")


class ConnectionState(enum.Enum):
    OPEN = "open"
    FAILED = "failed"  # the peer broke the framing: close without a reply
    CLOSED = "closed"


@dataclasses.dataclass(slots=True, eq=False)
class PendingCall:
    """A two-way request waiting for its response. ``token`` is the caller's handle (a Deferred in
    the Twisted layer); the connection only carries it."""

    opaque: int
    code: int
    deadline: float | None
    timeout: float | None = None
    token: Any = None
    #: the response may come as a ``ScannedResponseReceived`` (a header the fast scan accepts)
    scanned: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class RequestReceived:
    """The peer sent a request (possibly oneway) that the local side must dispatch."""

    command: RemotingCommand


@dataclasses.dataclass(frozen=True, slots=True)
class ResponseReceived:
    """A response matched a pending call, which is no longer pending."""

    command: RemotingCommand
    call: PendingCall


@dataclasses.dataclass(slots=True, eq=False)
class ScannedResponseReceived:
    """A JSON response that ``scan_json_header`` accepted matched a call sent with
    ``scanned=True``, which is no longer pending: no RemotingCommand was built
    (``header_scan.scanned_command`` builds it). Not frozen: one per response, and a frozen
    dataclass costs three times as much to make."""

    scan: re.Match[str]
    body: bytes | None
    call: PendingCall


@dataclasses.dataclass(frozen=True, slots=True)
class UnmatchedResponse:
    """A response whose opaque is not pending (late after a timeout, or bogus): log and drop."""

    command: RemotingCommand


@dataclasses.dataclass(frozen=True, slots=True)
class ProtocolFailed:
    """The peer's bytes are not a frame stream; always the last event. Close without replying."""

    error: RemoteProtocolError


Event = RequestReceived | ResponseReceived | ScannedResponseReceived | UnmatchedResponse | ProtocolFailed


class RemotingConnection:
    """One side of one remoting connection; either side may send requests (wire-format.md section 4).

    ``serialize_type`` is the header type of the requests we send. ``response_serialize_type``
    None answers in the request's own type (4.x ``NettyRemotingAbstract``); a SerializeType
    answers always in that type (5.x). ``max_pending`` bounds the two-way calls in flight.
    """

    def __init__(
        self,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        response_serialize_type: SerializeType | None = None,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_pending: int | None = None,
        first_opaque: int = 0,
    ) -> None:
        if not _INT32_MIN <= first_opaque <= _INT32_MAX:
            raise ValueError(f"first_opaque {first_opaque} is not an int32")
        self.serialize_type = SerializeType(serialize_type)
        self.response_serialize_type = (
            None if response_serialize_type is None else SerializeType(response_serialize_type)
        )
        self.max_pending = max_pending
        self._decoder = FrameDecoder(max_frame_length)
        self._next_opaque = first_opaque
        self._pending: dict[int, PendingCall] = {}  # insertion order is send order
        # Calls usually come due in the order they were sent (one timeout, pipelined or one by
        # one): then the pending table, in send order, is the deadline queue and nothing else is
        # kept per call. A call due more than ORDER_SLACK before one sent earlier turns on a
        # lazy-deletion min-heap of every deadline, used until no call is pending.
        self._ordered = True
        self._latest = _NEVER  # the latest deadline sent while ordered
        self._deadlines: list[tuple[float, int, PendingCall]] = []  # the heap, when not ordered
        self._seq = 0  # heap tie-breaker, so PendingCalls are never compared
        self.state = ConnectionState.OPEN
        self.error: RemoteProtocolError | None = None
        self._closed = False  # close() was called (state stays FAILED after a framing error)
        self._scanning = False  # a call was sent with scanned=True: responses are scanned first

    # ---- state ---------------------------------------------------------------------------------

    @property
    def pending(self) -> dict[int, PendingCall]:
        """A copy of the pending table: opaque -> call."""
        return dict(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def is_open(self) -> bool:
        return self.state is ConnectionState.OPEN

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held in the receive buffer."""
        return self._decoder.buffered

    def next_deadline(self) -> float | None:
        """The earliest deadline among pending calls, or None."""
        if self._ordered:
            # a call due more than ORDER_SLACK after the earliest so far: every later one is due
            # after that earliest one (no call is due ORDER_SLACK before one sent earlier)
            best = None
            for call in self._pending.values():
                deadline = call.deadline
                if deadline is None:
                    continue
                if best is None or deadline < best:
                    best = deadline
                elif deadline > best + ORDER_SLACK:
                    break
            return best
        heap = self._deadlines
        while heap and self._pending.get(heap[0][2].opaque) is not heap[0][2]:
            heapq.heappop(heap)  # answered, cancelled or expired since it was pushed
        return heap[0][0] if heap else None

    # ---- sending -------------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self.state is not ConnectionState.OPEN:
            raise LocalProtocolError(f"cannot {what}: connection {self.state.value}")

    def _allocate_opaque(self) -> int:
        # int32 wrap as Java's AtomicInteger; skip values still pending so that a very
        # long-lived request cannot be confused with a new one after a wrap.
        for _ in range(len(self._pending) + 1):
            opaque = self._next_opaque
            self._next_opaque = _INT32_MIN if opaque == _INT32_MAX else opaque + 1
            if opaque not in self._pending:
                return opaque
        raise AssertionError("unreachable: pending table larger than its own size")

    def send_request(
        self,
        cmd: RemotingCommand,
        deadline: float | None = None,
        *,
        timeout: float | None = None,
        token: Any = None,
    ) -> tuple[int, bytes]:
        """Assign an opaque to ``cmd`` and return ``(opaque, frame bytes)``.

        A two-way request becomes a pending call until its response arrives, ``expire`` returns
        it, ``cancel`` drops it or ``close`` ends the connection. A oneway request never does.
        """
        flag = cmd.flag
        if flag & FLAG_RESPONSE:
            self._check_open("send a request")  # a closed connection says so first
            raise LocalProtocolError(f"send_request got a response command (flag {flag})")
        return self._send(cmd.code, not flag & FLAG_ONEWAY, self._encode, cmd, deadline, timeout, token)

    def _encode(self, cmd: RemotingCommand, opaque: int) -> bytes:
        return encode_frame(cmd.with_opaque(opaque), self.serialize_type)

    def _send(self, code: int, two_way: Any, frame: Any, request: Any, deadline: float | None,
              timeout: float | None, token: Any, scanned: bool = False,
              call: PendingCall | None = None) -> tuple[int, bytes]:
        """A request's opaque, its frame (``frame(request, opaque)``) and, two-way, its pending call
        (``call`` when given, its fields set here, else a new one): the one path of
        ``send_request`` and ``send_prepared`` (checks and the usual opaque inline, as it runs
        once per request on every connection)."""
        if self.state is not ConnectionState.OPEN:
            self._check_open("send a request")
        pending = self._pending
        if two_way and self.max_pending is not None and len(pending) >= self.max_pending:
            raise RemotingTooManyRequestsError(
                f"{len(pending)} calls already in flight on this connection "
                f"(max_pending {self.max_pending})"
            )
        opaque = self._next_opaque
        if opaque in pending or opaque == _INT32_MAX:
            opaque = self._allocate_opaque()  # after a wrap: skip what is still pending
        else:
            self._next_opaque = opaque + 1
        data = frame(request, opaque)
        if two_way:
            if call is None:
                call = PendingCall(opaque, code, deadline, timeout, token, scanned)
            else:
                call.opaque = opaque
                call.code = code
                call.deadline = deadline
                call.timeout = timeout
                call.token = token
                call.scanned = scanned
            if not pending:  # nothing pending: any order starts afresh
                self._latest = _NEVER
                if not self._ordered:
                    self._ordered = True
                    self._deadlines = []
            pending[opaque] = call
            if deadline is not None:
                if self._ordered:
                    if deadline > self._latest:
                        self._latest = deadline
                    elif deadline < self._latest - ORDER_SLACK:
                        self._to_heap()
                else:
                    self._seq += 1
                    heapq.heappush(self._deadlines, (deadline, self._seq, call))
                    if len(self._deadlines) > 2 * len(pending) + 64:
                        self._compact()
        return opaque, data

    def _to_heap(self) -> None:
        """Calls no longer come due in send order: every pending deadline into the heap."""
        self._ordered = False
        heap = []
        seq = 0  # tie-breakers in send order, distinct: PendingCalls are never compared
        for call in self._pending.values():
            if call.deadline is not None:
                seq += 1
                heap.append((call.deadline, seq, call))
        heapq.heapify(heap)
        self._deadlines = heap
        self._seq = seq

    def send_prepared(
        self,
        request: PreparedRequest,
        deadline: float | None = None,
        *,
        timeout: float | None = None,
        token: Any = None,
        scanned: bool = False,
        call: PendingCall | None = None,
    ) -> tuple[int, bytes]:
        """``send_request`` for a two-way request framed but for its opaque (JSON headers only:
        the caller checks ``serialize_type``). ``scanned``: a response whose JSON header
        ``scan_json_header`` accepts comes as a ``ScannedResponseReceived``, undecoded. ``call``:
        the pending call to fill in (the caller's own object, e.g. a receiver that is its own
        call) instead of a new one."""
        if scanned:
            self._scanning = True
        return self._send(request.code, True, PreparedRequest.frame, request, deadline, timeout, token,
                          scanned, call)

    def send_prepared_oneway(self, request: PreparedRequest) -> bytes:
        """The frame of a oneway request framed but for its opaque (its template carries the
        ONEWAY flag; JSON headers only): an opaque, no pending call."""
        return self._send(request.code, False, PreparedRequest.frame, request, None, None, None)[1]

    def _compact(self) -> None:
        # Answered calls stay in the heap until they reach its top; rebuild before it bloats.
        if len(self._deadlines) > 2 * len(self._pending) + 64:
            live = self._pending
            self._deadlines = [e for e in self._deadlines if live.get(e[2].opaque) is e[2]]
            heapq.heapify(self._deadlines)

    def send_response(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        """Frame ``response`` as the answer to ``request``: its opaque, the RESPONSE flag set."""
        if self._closed:  # FAILED alone only broke the peer's stream, not ours
            raise LocalProtocolError("cannot send a response: connection closed")
        if request.is_response:
            raise LocalProtocolError("cannot answer a response")
        if request.is_oneway:
            raise LocalProtocolError(
                f"request {request.code} opaque {request.opaque} is oneway and must not be answered"
            )
        stype = self.response_serialize_type
        if stype is None:
            stype = request.serialize_type
        flag = (response.flag | FLAG_RESPONSE) & ~FLAG_ONEWAY
        if response.opaque != request.opaque or response.flag != flag:
            response = dataclasses.replace(response, opaque=request.opaque, flag=flag)
        return encode_frame(response, stype)

    # ---- receiving -----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed received bytes; return the events for every complete frame.

        When the bytes are not a valid frame stream, the events of the good frames before the bad
        bytes come first, then one ``ProtocolFailed``; the connection is then FAILED and ignores
        further input (the caller closes it without a reply, as Java's NettyDecoder does).
        """
        if self.state is not ConnectionState.OPEN:
            return []
        try:
            commands = self._decoder.feed_peeking(data, self._peek if self._scanning else None)
        except CodecError as e:
            events = self._events(e.frames)
            self.error = RemoteProtocolError(f"bad frame from peer: {e}")
            self.error.__cause__ = e
            self.state = ConnectionState.FAILED
            events.append(ProtocolFailed(self.error))
            return events
        return self._events(commands)

    def take_answer(self, buf: bytearray, n: int) -> ScannedResponseReceived | None:
        """``buf[:n]`` read from the socket when it is exactly one whole frame answering a call
        sent with ``scanned=True``, and nothing is buffered: that call taken, as
        ``receive_data(bytes(buf[:n]))`` would return it (its only event); else None and nothing
        changed (the bytes then go to ``receive_data``). No copy of the frame, no decoder pass."""
        if not self._scanning or self.state is not ConnectionState.OPEN or n < 8:
            return None
        decoder = self._decoder
        if decoder._buf or decoder._failed is not None or n > decoder.max_frame_length:
            return None
        (length,) = _HEADER_WORD.unpack_from(buf, 0)
        if length != n - 4:
            return None
        event = self._peek(buf, 4, n)
        if event is not None:
            del self._pending[event.call.opaque]  # _peek found it pending
        return event

    def _peek(self, buf: bytearray, start: int, end: int) -> ScannedResponseReceived | None:
        """A frame's payload before any decode: the response to a ``scanned`` call whose JSON
        header the scan accepts, else None (the frame is decoded as any other)."""
        (word,) = _HEADER_WORD.unpack_from(buf, start)
        start += 4
        # JSON (serialize type byte 0): the header word is the header length
        if word >> 24 or word > end - start:
            return None
        scan = scan_json_header(buf[start : start + word].decode("latin-1"))
        if scan is None or not int(scan[FLAG]) & FLAG_RESPONSE:
            return None
        opaque = int(scan[OPAQUE])
        call = self._pending.get(opaque)
        if call is None or not call.scanned:
            return None
        start += word  # the call is taken in _events, in frame order
        return ScannedResponseReceived(scan, bytes(buf[start:end]) if end > start else None, call)

    def _events(self, commands: list[Any]) -> list[Event]:
        events: list[Event] = []
        pending = self._pending
        for cmd in commands:
            if type(cmd) is ScannedResponseReceived:
                if pending.pop(cmd.call.opaque, None) is cmd.call:
                    events.append(cmd)
                else:  # an earlier frame of this read answered the call
                    events.append(UnmatchedResponse(scanned_command(cmd.scan, cmd.body)))
                continue
            if not cmd.flag & FLAG_RESPONSE:  # not is_response
                events.append(RequestReceived(cmd))
                continue
            call = pending.pop(cmd.opaque, None)
            events.append(UnmatchedResponse(cmd) if call is None else ResponseReceived(cmd, call))
        return events

    # ---- deadlines and the end -----------------------------------------------------------------

    def expire(self, now: float) -> list[PendingCall]:
        """Drop and return the calls whose deadline is <= ``now``, earliest first."""
        expired: list[PendingCall] = []
        pending = self._pending
        if self._ordered:
            # in send order, up to a call due more than ORDER_SLACK later (none after it is due)
            limit = now + ORDER_SLACK
            for call in pending.values():
                deadline = call.deadline
                if deadline is None:
                    continue
                if deadline <= now:
                    expired.append(call)
                elif deadline > limit:
                    break
            for call in expired:
                del pending[call.opaque]
            if len(expired) > 1:
                expired.sort(key=_deadline_of)  # stable: equal deadlines in send order
            return expired
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            _, _, call = heapq.heappop(heap)
            if self._pending.get(call.opaque) is call:
                del self._pending[call.opaque]
                expired.append(call)
        return expired

    def cancel(self, opaque: int) -> PendingCall | None:
        """Forget a pending call (its caller gave up); the call, or None if it was not pending."""
        return self._pending.pop(opaque, None)

    def close(self) -> list[PendingCall]:
        """The transport is gone or going: no more sends; drop and return every pending call."""
        if self.state is ConnectionState.OPEN:
            self.state = ConnectionState.CLOSED
        self._closed = True
        lost = list(self._pending.values())
        self._pending.clear()
        self._deadlines.clear()
        self._ordered = True
        self._latest = _NEVER
        return lost


def _deadline_of(call: PendingCall) -> float:
    return call.deadline  # type: ignore[return-value]  # only calls with one are sorted
