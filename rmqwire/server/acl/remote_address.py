"""IP allow-lists of the plain ACL (Java ``RemoteAddressStrategyFactory``).

One pattern, as ``globalWhiteRemoteAddresses`` entries and an account's ``whiteRemoteAddress``
take it:

- blank: matches nothing; ``*`` (or ``*.*.*.*``, ``*:*:*:*:*:*:*:*``): matches everything;
- ``192.168.1.{1,2,3}`` or ``10.0.0.1,10.0.0.2``: one of these addresses;
- ``192.168.1.*``, ``192.168.*.*``, ``192.168.1.10-20``, ``192.168.5-9.*``: an IPv4 range (the
  first ``*`` or ``a-b`` part is the range, the parts before it must match exactly);
- anything else: one IPv4 or IPv6 address.

IPv6 addresses compare in their exploded form. IPv6 ranges are refused (not implemented).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Callable

from rmqwire.server.acl.permission import AclError

AddressMatcher = Callable[[str], bool]
_ANY = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def normalize(address: str) -> str | None:
    """An address as patterns compare it (IPv6 exploded), or None when it is not an IP."""
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return None
    return ip.exploded.upper() if ip.version == 6 else str(ip)


def _one(address: str) -> str:
    got = normalize(address)
    if got is None:
        raise AclError(f"Netaddress examine Exception netaddress is {address}")
    return got


def _never(_: str) -> bool:
    return False


def _always(_: str) -> bool:
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class _OneOf:
    addresses: frozenset[str]

    def __call__(self, remote: str) -> bool:
        return normalize(remote) in self.addresses


@dataclasses.dataclass(frozen=True, slots=True)
class _Ipv4Range:
    head: tuple[str, ...]   # the exact parts before the range part
    low: int
    high: int

    def __call__(self, remote: str) -> bool:
        got = normalize(remote)
        if got is None or ":" in got:
            return False
        parts = got.split(".")
        n = len(self.head)
        return tuple(parts[:n]) == self.head and self.low <= int(parts[n]) <= self.high


def _octet(text: str, pattern: str) -> int:
    try:
        v = int(text.strip())
    except ValueError:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}") from None
    if not 0 <= v <= 255:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    return v


def _ipv4_range(pattern: str) -> AddressMatcher:
    parts = [p for p in pattern.split(".") if p]
    if len(parts) != 4:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    for index in (1, 2, 3):
        value = parts[index].strip()
        if value == "*":
            low, high = 0, 255
        elif "-" in value:
            if value.startswith("-"):
                raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} ")
            lo_text, _, hi_text = value.partition("-")
            low, high = _octet(lo_text, pattern), _octet(hi_text, pattern)
            if low > high:
                raise AclError("RangeRemoteAddressStrategy netaddress examine scope Exception "
                               f"start is {low} , end is {high}")
        else:
            continue
        head = tuple(str(_octet(p, pattern)) for p in parts[:index])
        return _Ipv4Range(head, low, high)
    raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")


def address_matcher(pattern: str | None) -> AddressMatcher:
    """The matcher of one allow-list pattern; AclError when it is malformed."""
    if pattern is None or not pattern.strip():
        return _never
    pattern = pattern.strip()
    if pattern in _ANY:
        return _always
    if pattern.endswith("}"):
        base, brace, inner = pattern.partition("{")
        if not brace or ":" in pattern:
            raise AclError(f"MultipleRemoteAddressStrategy has got a/some wrong format IP(s) {pattern}")
        return _OneOf(frozenset(_one(base + p) for p in inner[:-1].split(",") if p))
    if "," in pattern:
        return _OneOf(frozenset(_one(p) for p in pattern.split(",") if p))
    if "*" in pattern or "-" in pattern:
        if ":" in pattern:
            raise AclError(f"IPv6 address ranges are not supported: {pattern}")
        return _ipv4_range(pattern)
    return _OneOf(frozenset({_one(pattern)}))
