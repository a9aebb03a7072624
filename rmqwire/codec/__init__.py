"""Sans-IO codec for the RocketMQ remoting protocol (no Twisted, no sockets)."""

from rmqwire.codec.codes import (
    DEFAULT_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
    version_name,
    version_ordinal,
)
from rmqwire.codec.frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    RemotingCommand,
    decode_frame,
    encode_frame,
)
from rmqwire.errors import CodecError

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "DEFAULT_VERSION",
    "CodecError",
    "FrameDecoder",
    "LanguageCode",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_frame",
    "encode_frame",
    "version_name",
    "version_ordinal",
]
