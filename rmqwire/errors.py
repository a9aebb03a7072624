"""One exception tree for rmqwire (stdlib only; every layer may import it)."""

from __future__ import annotations


class RmqwireError(Exception):
    """Base of every rmqwire exception."""


class CodecError(RmqwireError, ValueError):
    """Malformed bytes or values met while encoding or decoding.

    ``offset`` is the byte offset in the input where decoding failed, when known.
    """

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message if offset is None else f"{message} (at byte {offset})")
        self.offset = offset
        #: Frames decoded before the error in the same FrameDecoder.feed call.
        self.frames: list = []


class FrameTooLargeError(CodecError):
    """A frame's length prefix exceeds the configured maximum frame length."""


class HeaderLengthError(CodecError):
    """The header length in the header word does not fit inside the frame."""


class UnknownSerializeTypeError(CodecError):
    """The serialize-type byte of the header word is neither JSON (0) nor ROCKETMQ (1)."""


class HeaderDecodeError(CodecError):
    """The JSON or ROCKETMQ header could not be decoded (bad JSON, bad UTF-8, bad field)."""


class MissingHeaderFieldError(CodecError):
    """A required (Java ``@CFNotNull``) custom header field is absent."""


class MessageDecodeError(CodecError):
    """A stored/pulled message record or a batch body is malformed."""


class ProtocolError(RmqwireError):
    """The remoting conversation broke its rules."""


class LocalProtocolError(ProtocolError):
    """We misused the API (e.g. replying to a oneway request)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes we cannot accept; the connection must be closed without a reply.

    ``events`` holds what the good frames before the bad bytes produced; they are still handled.
    """

    def __init__(self, message: str, events: list | None = None) -> None:
        super().__init__(message)
        self.events = events or []


class RemotingError(RmqwireError):
    """Transport-level failure of a remoting call."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the call's timeout."""


class RemotingConnectError(RemotingError):
    """The TCP connection to the peer could not be established."""


class ConnectionLostError(RemotingError):
    """The connection closed while the call was pending."""


class MQClientError(RmqwireError):
    """Local misuse of the client API (bad topic name, oversized message, ...)."""


class BrokerResponseError(RmqwireError):
    """A peer answered with a non-success response code.

    ``code`` is the int response code, ``remark`` the peer's remark (may be None).
    """

    def __init__(self, code: int, remark: str | None = None) -> None:
        super().__init__(f"response code {code}: {remark}" if remark else f"response code {code}")
        self.code = code
        self.remark = remark
