"""Blocking one-shot remoting requests, used to probe the official servers (readiness, routes).

Deliberately independent of rmqwire.remoting (Twisted): the test peer must not depend on the code it
tests beyond the codec, and a plain socket is enough for a request/response probe.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from rmqwire.codec import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode_frame

_opaques = itertools.count(1)


class WireError(RuntimeError):
    """The peer closed, timed out or answered with a non-success code."""


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def request(addr: str, code: int, ext_fields: dict[str, str] | None = None, body: bytes | None = None,
            timeout: float = 5.0) -> RemotingCommand:
    """Send one request on a fresh connection and return the response with the same opaque."""
    opaque = next(_opaques)
    cmd = RemotingCommand.request(code, ext_fields, body, opaque=opaque)
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
    """Parse a body written by fastjson 1 (bare numeric map keys such as ``{0:"127.0.0.1:10911"}``).

    Returns plain dicts and lists; bare numeric keys become ints. Uses the project's codec
    (rmqwire.codec.fastjson) when present, else a small fallback that quotes bare keys with a marker.
    """
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        from rmqwire.codec import fastjson
    except ImportError:
        return json.loads(_quote_bare_keys(text), object_pairs_hook=_unmark_keys)
    return _plain(fastjson.loads(text))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_BARE = "\x00"


def _unmark_keys(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    return {int(k[1:]) if k.startswith(_BARE) else k: v for k, v in pairs}


def _quote_bare_keys(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    expect_key = False
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            expect_key = False
            continue
        if ch in "{,":
            expect_key = True
            out.append(ch)
        elif expect_key and (ch.isdigit() or ch == "-"):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            k = j
            while k < n and text[k].isspace():
                k += 1
            if k < n and text[k] == ":":
                out.append(f'"\\u0000{text[i:j]}"')
            else:
                out.append(text[i:j])
            expect_key = False
            i = j
            continue
        elif not ch.isspace():
            expect_key = False
            out.append(ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO body: broker name -> {brokerId: addr}, cluster name -> broker names."""

    broker_addrs: dict[str, dict[int, str]] = field(default_factory=dict)
    clusters: dict[str, frozenset[str]] = field(default_factory=dict)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(0)


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int


@dataclass(frozen=True, slots=True)
class TopicRoute:
    queue_datas: tuple[QueueData, ...]
    broker_addrs: dict[str, dict[int, str]]


def _check(reply: RemotingCommand, what: str) -> bytes:
    if reply.code != ResponseCode.SUCCESS:
        raise WireError(f"{what}: response code {reply.code}, remark {reply.remark!r}")
    return reply.body or b""


def get_cluster_info(namesrv_addr: str, timeout: float = 5.0) -> ClusterInfo:
    body = _check(request(namesrv_addr, RequestCode.GET_BROKER_CLUSTER_INFO, timeout=timeout),
                  "GET_BROKER_CLUSTER_INFO")
    raw = loads_fastjson(body) if body else {}
    addrs = {
        name: {int(bid): addr for bid, addr in (bd.get("brokerAddrs") or {}).items()}
        for name, bd in (raw.get("brokerAddrTable") or {}).items()
    }
    clusters = {c: frozenset(names) for c, names in (raw.get("clusterAddrTable") or {}).items()}
    return ClusterInfo(addrs, clusters)


def get_route_info(namesrv_addr: str, topic: str, timeout: float = 5.0) -> TopicRoute | None:
    """GET_ROUTEINFO_BY_TOPIC; None when the NameServer answers TOPIC_NOT_EXIST."""
    reply = request(namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=timeout)
    if reply.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    raw = loads_fastjson(_check(reply, f"GET_ROUTEINFO_BY_TOPIC {topic}"))
    queues = tuple(
        QueueData(q["brokerName"], int(q["readQueueNums"]), int(q["writeQueueNums"]), int(q["perm"]))
        for q in raw.get("queueDatas") or ()
    )
    addrs = {
        bd["brokerName"]: {int(bid): addr for bid, addr in (bd.get("brokerAddrs") or {}).items()}
        for bd in raw.get("brokerDatas") or ()
    }
    return TopicRoute(queues, addrs)
