"""Sans-IO remoting connection: frame reassembly, opaque allocation and the pending table.

No sockets, no clock, no Twisted: bytes go in through ``receive_data`` and come out of
``send_request``/``send_response``; deadlines are plain numbers supplied by the caller, and
``expire(now)`` reports the requests whose deadline has passed (cf. h11's ``Connection``).
Spec: shared/spec/wire-format.md sections 1 and 4.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from rmqwire.codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, SerializeType
from rmqwire.codec.frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    RemotingCommand,
    encode_frame,
)
from rmqwire.errors import CodecError, LocalProtocolError, RemoteProtocolError

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_ABSENT = object()  # sentinel: dict.pop default that no deadline can equal


@dataclasses.dataclass(frozen=True, slots=True)
class RequestReceived:
    """The peer sent a request (possibly oneway) that the local side must dispatch."""

    command: RemotingCommand


@dataclasses.dataclass(frozen=True, slots=True)
class ResponseReceived:
    """A response matched a pending request; that request is no longer pending."""

    command: RemotingCommand


@dataclasses.dataclass(frozen=True, slots=True)
class UnmatchedResponse:
    """A response whose opaque is not pending (late after a timeout, or bogus): log and drop."""

    command: RemotingCommand


Event = RequestReceived | ResponseReceived | UnmatchedResponse


class RemotingConnection:
    """One side of one remoting connection; either side may send requests (wire-format.md section 4).

    ``serialize_type`` is the header type of the requests we send. ``response_serialize_type``
    None answers in the request's own type (4.x ``NettyRemotingAbstract``); a SerializeType
    answers always in that type (5.x).
    After a framing error the connection is in the error state and refuses further input.
    """

    def __init__(
        self,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        response_serialize_type: SerializeType | None = None,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        first_opaque: int = 0,
    ) -> None:
        if not _INT32_MIN <= first_opaque <= _INT32_MAX:
            raise ValueError(f"first_opaque {first_opaque} is not an int32")
        self.serialize_type = SerializeType(serialize_type)
        self.response_serialize_type = (
            None if response_serialize_type is None else SerializeType(response_serialize_type)
        )
        self._decoder = FrameDecoder(max_frame_length)
        self._next_opaque = first_opaque
        # opaque -> deadline (None: no deadline). Insertion order is send order.
        self._pending: dict[int, float | None] = {}
        self._error: RemoteProtocolError | None = None

    # ---- state ---------------------------------------------------------------------------------

    @property
    def pending(self) -> dict[int, float | None]:
        """A copy of the pending table: opaque -> deadline."""
        return dict(self._pending)

    @property
    def failed(self) -> bool:
        return self._error is not None

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held in the receive buffer."""
        return self._decoder.buffered

    def next_deadline(self) -> float | None:
        """The earliest deadline among pending requests, or None."""
        deadlines = [d for d in self._pending.values() if d is not None]
        return min(deadlines) if deadlines else None

    # ---- sending -------------------------------------------------------------------------------

    def _allocate_opaque(self) -> int:
        # int32 wrap as Java's AtomicInteger; skip values still pending so that a very
        # long-lived request cannot be confused with a new one after a wrap.
        for _ in range(len(self._pending) + 1):
            opaque = self._next_opaque
            self._next_opaque = _INT32_MIN if opaque == _INT32_MAX else opaque + 1
            if opaque not in self._pending:
                return opaque
        raise AssertionError("unreachable: pending table larger than its own size")

    def send_request(self, cmd: RemotingCommand, deadline: float | None = None) -> tuple[int, bytes]:
        """Assign an opaque to ``cmd`` and return ``(opaque, frame bytes)``.

        A two-way request becomes pending until its response arrives, ``expire`` reports it, or
        ``cancel`` drops it. A oneway request (ONEWAY flag) never becomes pending.
        """
        if cmd.is_response:
            raise LocalProtocolError(f"send_request got a response command (flag {cmd.flag})")
        opaque = self._allocate_opaque()
        data = encode_frame(cmd.with_opaque(opaque), self.serialize_type)
        if not cmd.is_oneway:
            self._pending[opaque] = deadline
        return opaque, data

    def send_response(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        """Frame ``response`` as the answer to ``request``: its opaque, the RESPONSE flag set."""
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
        answer = dataclasses.replace(response, opaque=request.opaque, flag=flag)
        return encode_frame(answer, stype)

    # ---- receiving -----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed received bytes; return the events for every complete frame.

        Raises RemoteProtocolError (the CodecError as its cause) when the bytes are not a valid
        frame stream; the connection must then be closed without a reply.
        """
        if self._error is not None:
            raise RemoteProtocolError(str(self._error))  # without the events: already handed out
        try:
            commands = self._decoder.feed(data)
        except CodecError as e:
            self._error = RemoteProtocolError(
                f"bad frame from peer: {e}", events=list(self._events(e.frames))
            )
            self._error.__cause__ = e
            raise self._error from e
        return list(self._events(commands))

    def _events(self, commands: list[RemotingCommand]) -> Iterator[Event]:
        for cmd in commands:
            if not cmd.is_response:
                yield RequestReceived(cmd)
            elif self._pending.pop(cmd.opaque, _ABSENT) is not _ABSENT:
                yield ResponseReceived(cmd)
            else:
                yield UnmatchedResponse(cmd)

    # ---- deadlines -----------------------------------------------------------------------------

    def expire(self, now: float) -> list[int]:
        """Drop and return the opaques whose deadline is <= ``now``, in send order."""
        expired = [op for op, d in self._pending.items() if d is not None and d <= now]
        for op in expired:
            del self._pending[op]
        return expired

    def cancel(self, opaque: int) -> bool:
        """Forget a pending request (its caller gave up); True if it was pending."""
        return self._pending.pop(opaque, _ABSENT) is not _ABSENT

    def close(self) -> list[int]:
        """The transport is gone: drop and return every pending opaque, in send order."""
        lost = list(self._pending)
        self._pending.clear()
        return lost

