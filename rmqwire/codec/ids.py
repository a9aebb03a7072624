"""Message ids and client ids (wire-format.md section 10.7).

- Offset message id: uppercase hex of store IP (4 or 16 bytes) + port (int32) + commit-log offset
  (int64); 32 hex chars for IPv4, 56 for IPv6 (Java ``MessageDecoder.createMessageId``).
- Client unique id (the UNIQ_KEY property): uppercase hex of IP + pid (int16) + a per-process int32
  + ms since the start of the current month in local time (int32) + a wrapping int16 counter
  (Java ``MessageClientIDSetter``). The layout is kept so Java tooling can read IP and time back.
- Client id (HeartbeatData.clientID): ``ip@instanceName[@unitName][@STREAM]``.

No I/O here: callers pass the local IP (the client layer discovers it).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import itertools
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable

from rmqwire.codec import java
from rmqwire.errors import CodecError

Host = tuple[str, int]


# ---- offset message id ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetMessageId:
    """A decoded offset message id: the storing broker's address and the commit-log offset."""

    store_host: Host
    commit_log_offset: int


def _pack_ip(ip: str | bytes) -> bytes:
    if isinstance(ip, (bytes, bytearray)):
        if len(ip) not in (4, 16):
            raise CodecError(f"an IP address is 4 or 16 bytes, not {len(ip)}")
        return bytes(ip)
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_pton(family, ip)
        except (OSError, TypeError, ValueError):
            continue
    raise CodecError(f"not an IP address: {ip!r}")


def _check_port(port: int) -> int:
    # Java's InetSocketAddress refuses anything else.
    if not 0 <= port <= 0xFFFF:
        raise CodecError(f"port {port} is out of range")
    return port


def _ip_str(packed: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6 if len(packed) == 16 else socket.AF_INET, packed)


def create_offset_msg_id(store_host: Host, commit_log_offset: int) -> str:
    """``C0A8001400002A9F00000000000004D2`` for ``("192.168.0.20", 10911)`` and offset 1234."""
    try:
        ip, port = store_host
        tail = struct.pack(">iq", port, commit_log_offset)
    except (TypeError, ValueError, struct.error) as e:
        raise CodecError(
            f"bad offset message id fields {store_host!r}, {commit_log_offset!r}: {e}"
        ) from None
    _check_port(port)
    return (_pack_ip(ip) + tail).hex().upper()


def parse_offset_msg_id(msg_id: str) -> OffsetMessageId:
    """Inverse of ``create_offset_msg_id``: 32 hex chars mean an IPv4 host, 56 an IPv6 host."""
    raw = _unhex(msg_id, "offset message id")
    if len(raw) not in (16, 28):
        raise CodecError(f"an offset message id has 32 or 56 hex chars, not {len(msg_id)}")
    ip_len = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    host = (_ip_str(raw[:ip_len]), _check_port(port))
    return OffsetMessageId(store_host=host, commit_log_offset=offset)


def _unhex(s: str, what: str) -> bytes:
    try:
        raw = bytes.fromhex(s)
    except (ValueError, TypeError):
        raise CodecError(f"{what} is not hex: {s!r}") from None
    if len(raw) * 2 != len(s):  # fromhex skips whitespace; an id has none
        raise CodecError(f"{what} is not hex: {s!r}")
    return raw


# ---- client unique id (UNIQ_KEY) ------------------------------------------------------------------


def _month_bounds_ms(ms: int) -> tuple[int, int]:
    """Start of the local-time month holding ``ms`` and of the next month, in epoch ms."""
    dt = datetime.datetime.fromtimestamp(ms // 1000)
    start = dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (start + datetime.timedelta(days=32)).replace(day=1)
    return int(start.timestamp()) * 1000, int(nxt.timestamp()) * 1000


#: "00" .. "FF": an id's counter is two of them (Java's writeShort, uppercase hex)
_HEX2 = [f"{i:02X}" for i in range(256)]
#: the same as ASCII bytes (an id's last two characters as an encoder writes them)
HEX2_BYTES = [h.encode() for h in _HEX2]


def _previous_month_start_ms(month_start_ms: int) -> int:
    dt = datetime.datetime.fromtimestamp(month_start_ms // 1000)
    prev = (dt - datetime.timedelta(days=1)).replace(day=1, hour=0, minute=0, second=0)
    return int(prev.timestamp()) * 1000


class UniqueIdGenerator:
    """Makes UNIQ_KEY values like Java's ``MessageClientIDSetter.createUniqID``; thread-safe.

    ``ip`` is the client's IP (string or 4/16 packed bytes); without one, Java's fallback applies:
    a "fake IP" made of the low 4 bytes of the current time in ms. ``pid`` keeps its low 16 bits.
    ``hash_code`` stands in for Java's class-loader hash: random per generator unless given.
    ``clock`` returns epoch ms (injected for tests).
    """

    def __init__(
        self,
        ip: str | bytes | None = None,
        pid: int | None = None,
        hash_code: int | None = None,
        *,
        clock: Callable[[], int] = java.now_ms,
        counter_start: int = 0,
    ) -> None:
        self._clock = clock
        if ip is None:
            packed = struct.pack(">q", clock())[4:]
        else:
            packed = _pack_ip(ip)
        pid = os.getpid() if pid is None else pid
        hash_code = secrets.randbits(32) if hash_code is None else hash_code
        self._prefix = (packed + struct.pack(">HI", pid & 0xFFFF, hash_code & 0xFFFFFFFF)).hex().upper()
        self._lock = threading.Lock()  # the month bounds and the head; the counter needs none
        # Java's AtomicInteger: count's __next__ is one C call, which the GIL never splits, so
        # no two ids (single or in a batch) take the same value
        self._count = itertools.count(counter_start)
        self._start, self._next_start = _month_bounds_ms(clock())
        #: (ms, the id's head for that ms: prefix + time part), replaced as one tuple
        self._head_at: tuple[int, str] = (-1, "")

    def _head(self, now: int) -> str:
        """The id up to its counter for a clock reading of ``now``."""
        with self._lock:
            if now >= self._next_start:
                self._start, self._next_start = _month_bounds_ms(now)
            diff = (now - self._start) & 0xFFFFFFFF  # Java: (int)(current - startTime)
            signed = diff - 0x100000000 if diff & 0x80000000 else diff
            if -1_000_000 < signed < 0:
                diff = 0  # a clock stepped back (NTP) by less than 1000 s: Java clamps to 0
            head = f"{self._prefix}{diff:08X}"
            # the head depends on `now` and the month start, which only this method moves
            self._head_at = (now, head)
        return head

    def next_id(self) -> str:
        now = self._clock()
        at, head = self._head_at
        if at != now:
            head = self._head(now)
        c = next(self._count)
        return head + _HEX2[c >> 8 & 0xFF] + _HEX2[c & 0xFF]

    def next_ids(self, n: int) -> list[str]:
        """``n`` ids in one step (one clock read): what ``n`` calls of ``next_id`` in the same
        millisecond, with no other caller between them, return."""
        return self.next_id_run(n)[0]

    def next_id_run(self, n: int) -> tuple[list[str], str, int]:
        """``next_ids(n)``, and when every id is one text followed by two hex digits of
        consecutive counter low bytes (the usual case: no wrap of the low byte among them): that
        text and the first id's low byte, so an encoder can write the ids from ``HEX2_BYTES``
        (else "", -1)."""
        now = self._clock()
        at, head = self._head_at
        if at != now:
            head = self._head(now)
        if n <= 0:
            return [], "", -1
        counters = list(itertools.islice(self._count, n))
        first = counters[0]
        if counters[-1] - first != n - 1:  # another thread between them (no CPython does that)
            return [head + _HEX2[c >> 8 & 0xFF] + _HEX2[c & 0xFF] for c in counters], "", -1
        low = first & 0xFF
        if low + n <= 256:  # one run: the high byte's text once
            shared = head + _HEX2[first >> 8 & 0xFF]
            return list(map(shared.__add__, _HEX2[low:low + n])), shared, low
        # each run of ids sharing the counter's high byte: that head once, then one concatenation
        # per id (the low bytes' texts are a slice of the table)
        ids: list[str] = []
        c, end = first, first + n
        while c < end:
            stop = min(end, (c | 0xFF) + 1)
            ids += map((head + _HEX2[c >> 8 & 0xFF]).__add__, _HEX2[c & 0xFF:(stop - 1 & 0xFF) + 1])
            c = stop
        return ids, "", -1

    __call__ = next_id


@dataclasses.dataclass(frozen=True, slots=True)
class UniqueIdInfo:
    """The parts of a UNIQ_KEY. ``span_ms`` is ms since the start of the (local) month it was made."""

    ip: str
    pid: int
    hash_code: int
    span_ms: int
    counter: int

    def nearly_time_ms(self, now_ms: int | None = None) -> int:
        return _nearly_time(self.span_ms, java.now_ms() if now_ms is None else now_ms)


def parse_unique_id(uniq_id: str) -> UniqueIdInfo:
    """Split a UNIQ_KEY (32 hex chars with an IPv4 address, 56 with IPv6)."""
    raw = _unhex(uniq_id, "unique message id")
    if len(raw) not in (16, 28):
        raise CodecError(f"a unique message id has 32 or 56 hex chars, not {len(uniq_id)}")
    ip_len = len(raw) - 12
    pid, hash_code, span, counter = struct.unpack_from(">HIIH", raw, ip_len)
    return UniqueIdInfo(_ip_str(raw[:ip_len]), pid, hash_code, span, counter)


def _nearly_time(span_ms: int, now_ms: int) -> int:
    month_start, _ = _month_bounds_ms(now_ms)
    if month_start + span_ms >= now_ms:
        month_start = _previous_month_start_ms(month_start)  # it was made last month
    return month_start + span_ms


def nearly_time_from_id(uniq_id: str, now_ms: int | None = None) -> int:
    """Epoch ms when the id was made, as Java's ``getNearlyTimeFromID`` reckons it (local time)."""
    return parse_unique_id(uniq_id).nearly_time_ms(now_ms)


def ip_from_id(uniq_id: str) -> str:
    """The client IP in a UNIQ_KEY spelled as Java's ``getIPStrFromID`` does: dotted IPv4, or IPv6
    as eight 4-digit lowercase groups, uncompressed (``UniqueIdInfo.ip`` is the compressed form)."""
    ip = ipaddress.ip_address(parse_unique_id(uniq_id).ip)
    return ip.exploded if ip.version == 6 else str(ip)


# ---- client id ------------------------------------------------------------------------------------


def instance_name_for_pid(instance_name: str = "DEFAULT", *, pid: int | None = None) -> str:
    """Java ``changeInstanceNameToPID``: ``DEFAULT`` becomes ``<pid>#<nanotime>``."""
    if instance_name != "DEFAULT":
        return instance_name
    return f"{os.getpid() if pid is None else pid}#{time.monotonic_ns()}"


def build_client_id(
    client_ip: str,
    instance_name: str = "DEFAULT",
    unit_name: str | None = None,
    *,
    stream: bool = False,
) -> str:
    """Java ``ClientConfig.buildMQClientId``: ``ip@instanceName[@unitName][@STREAM]``.

    Pass the instance name through ``instance_name_for_pid`` first if it may be ``DEFAULT``.
    """
    parts = [client_ip, instance_name]
    if unit_name and unit_name.strip():
        parts.append(unit_name)
    if stream:
        parts.append("STREAM")
    return "@".join(parts)
