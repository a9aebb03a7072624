"""One RemotingConfig for every client and server, and the RPC hook interface.

Java threads the same options through ``NettyClientConfig`` / ``NettyServerConfig`` and a list of
``RPCHook``s; here one frozen value is handed to ``RemotingClient``, ``RemotingServer`` and each
``RemotingProtocol`` they build.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from rmqwire.codec.codes import DEFAULT_VERSION, LanguageCode, SerializeType
from rmqwire.codec.frame import DEFAULT_MAX_FRAME_LENGTH, RemotingCommand

#: Java's ``com.rocketmq.remoting.client.connect.timeout`` (3000 ms).
DEFAULT_CONNECT_TIMEOUT = 3.0
#: Java's default per-call timeout of MQClientAPIImpl calls (3000 ms; sends use sendMsgTimeout).
DEFAULT_CALL_TIMEOUT = 3.0
#: Java's ``serverChannelMaxIdleTimeSeconds`` / client ``maxIdleTimeSeconds``.
DEFAULT_IDLE_TIMEOUT = 120.0
#: Java's ``clientAsyncSemaphoreValue`` / ``clientOnewaySemaphoreValue`` (65535 each).
DEFAULT_MAX_INFLIGHT = 65535
#: After close(), in-flight calls and buffered writes get this long; then connections are aborted.
DEFAULT_CLOSE_GRACE = 5.0


class RPCHook(Protocol):
    """Java ``RPCHook``: sees every request before it is sent and every response after it arrives.

    ``before_request`` returns the command to send (commands are immutable: return a changed copy,
    e.g. with an ACL signature). Raising fails the call before anything is written.
    """

    def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand: ...

    def after_response(
        self, addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None: ...


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RemotingConfig:
    """Options of one remoting endpoint (client pool or server).

    - ``serialize_type``: header type of the requests we send (Java default JSON).
    - ``response_serialize_type``: None answers in each request's type (4.x); a SerializeType
      always answers in that type (5.x).
    - ``language`` / ``version``: stamped on requests we send and responses we build. A server that
      mimics the Java broker uses ``LanguageCode.JAVA``.
    - ``call_timeout``: the default timeout of a call; ``connect_timeout`` bounds connecting.
    - ``idle_timeout``: close a connection after this many seconds with neither reads nor writes.
    - ``max_frame_length``: the largest frame accepted (Java ``frameMaxLength``).
    - ``max_inflight``: two-way calls pending on one connection; one more fails at once with
      ``RemotingTooManyRequestsError`` (Java's semaphores, without their wait).
    - ``tls``: a Twisted TLS connection creator (client: ``optionsForClientTLS``; server:
      ``CertificateOptions``), or None for plain TCP.
    - ``rpc_hooks``: applied in order to every request we send (and to every response received).
    - ``close_grace``: how long stopping waits for in-flight calls before closing connections.
    """

    serialize_type: SerializeType = SerializeType.JSON
    response_serialize_type: SerializeType | None = None
    language: LanguageCode = LanguageCode.PYTHON
    version: int = DEFAULT_VERSION
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    tls: Any = None
    rpc_hooks: tuple[RPCHook, ...] = ()
    close_grace: float = DEFAULT_CLOSE_GRACE

    def __post_init__(self) -> None:
        if self.idle_timeout is not None and not self.idle_timeout > 0:
            raise ValueError(f"idle_timeout must be positive or None, got {self.idle_timeout}")
        for name in ("call_timeout", "connect_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1, got {self.max_inflight}")
        if self.close_grace < 0:
            raise ValueError(f"close_grace must not be negative, got {self.close_grace}")
        object.__setattr__(self, "serialize_type", SerializeType(self.serialize_type))
        if self.response_serialize_type is not None:
            object.__setattr__(
                self, "response_serialize_type", SerializeType(self.response_serialize_type)
            )
        object.__setattr__(self, "rpc_hooks", tuple(self.rpc_hooks))

    def replace(self, **changes: Any) -> RemotingConfig:
        return dataclasses.replace(self, **changes)

    def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        for hook in self.rpc_hooks:
            request = hook.before_request(addr, request)
        return request

    def after_response(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
        for hook in self.rpc_hooks:
            hook.after_response(addr, request, response)


#: What a Java broker or NameServer answers with (language JAVA, version 479, 5.x serialize rule).
JAVA_SERVER_CONFIG = RemotingConfig(language=LanguageCode.JAVA)
