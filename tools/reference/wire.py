"""Blocking one-shot remoting requests, used to probe the official servers (readiness, routes).

Deliberately independent of rmqwire.remoting (Twisted): the test peer must not depend on the code it
tests beyond the codec, and a plain socket is enough for a request/response probe. Requests are the
codec's typed Command declarations (``call``); ``request`` sends a raw command (signed probes).
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rmqwire.codec import FrameDecoder, RemotingCommand, encode_frame, fastjson
from rmqwire.codec.commands import (
    ClusterInfo as ClusterInfoBody,
)
from rmqwire.codec.commands import (
    Command,
    GetBrokerClusterInfo,
    GetRouteInfo,
    Response,
    TopicRouteData,
)
from rmqwire.errors import BrokerResponseError, TopicNotExistError

_opaques = itertools.count(1)


class WireError(RuntimeError):
    """The peer closed, timed out or answered with a non-success code."""


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def call(addr: str, command: type[Command], header: Any = None, *, body: Any = None,
         timeout: float = 5.0, **fields: Any) -> Response[Any, Any]:
    """``command`` on a fresh connection: its typed Response, or its typed error
    (``rmqwire.errors.for_code``) for a response code that is not an outcome."""
    return command.parse_response(send(addr, command.request(header, body, **fields), timeout))


def request(addr: str, code: int, ext_fields: dict[str, str] | None = None, body: bytes | None = None,
            timeout: float = 5.0) -> RemotingCommand:
    """Send one raw request on a fresh connection and return the response (any code)."""
    return send(addr, RemotingCommand.request(code, ext_fields, body), timeout)


def send(addr: str, cmd: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
    """Send ``cmd`` on a fresh connection and return the response with the same opaque."""
    code = cmd.code
    opaque = next(_opaques)
    cmd = cmd.with_opaque(opaque)
    deadline = time.monotonic() + timeout
    decoder = FrameDecoder()
    with socket.create_connection(split_addr(addr), timeout=timeout) as sock:
        sock.sendall(encode_frame(cmd))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WireError(f"no response to code {code} from {addr} within {timeout}s")
            sock.settimeout(remaining)
            try:
                data = sock.recv(65536)
            except TimeoutError as exc:
                raise WireError(f"no response to code {code} from {addr} within {timeout}s") from exc
            if not data:
                raise WireError(f"{addr} closed the connection before answering code {code}")
            for reply in decoder.feed(data):
                if reply.is_response and reply.opaque == opaque:
                    return reply


def loads_fastjson(data: bytes | str) -> Any:
    """Parse a body written by fastjson 1 (bare numeric map keys such as ``{0:"127.0.0.1:10911"}``)
    into plain dicts and lists; bare numeric keys become ints."""
    return _plain(fastjson.loads(data))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """A view of the GET_BROKER_CLUSTER_INFO body: broker name -> {brokerId: addr}, cluster name ->
    broker names (decoded by rmqwire.codec.commands.ClusterInfo)."""

    broker_addrs: dict[str, dict[int, str]] = field(default_factory=dict)
    clusters: dict[str, frozenset[str]] = field(default_factory=dict)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(0)


def get_cluster_info(namesrv_addr: str, timeout: float = 5.0) -> ClusterInfo:
    try:
        info = call(namesrv_addr, GetBrokerClusterInfo, timeout=timeout).body or ClusterInfoBody()
    except BrokerResponseError as e:  # e.g. SYSTEM_ERROR while booting: not ready yet
        raise WireError(f"GET_BROKER_CLUSTER_INFO: {e}") from e
    addrs = {name: dict(bd.broker_addrs or {}) for name, bd in (info.broker_addr_table or {}).items()}
    clusters = {c: frozenset(names) for c, names in (info.cluster_addr_table or {}).items()}
    return ClusterInfo(addrs, clusters)


def get_route_info(namesrv_addr: str, topic: str, timeout: float = 5.0) -> TopicRouteData | None:
    """GET_ROUTEINFO_BY_TOPIC; None when the NameServer answers TOPIC_NOT_EXIST."""
    try:
        return call(namesrv_addr, GetRouteInfo, topic=topic, timeout=timeout).body
    except TopicNotExistError:
        return None
