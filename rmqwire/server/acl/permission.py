"""Permissions of the 4.x plain ACL (Java ``org.apache.rocketmq.acl.common.Permission``).

A permission is a bit set: DENY 1, ANY 2, PUB 4, SUB 8. An owned DENY bit refuses everything; a
needed ANY is met by PUB or SUB; otherwise the needed and owned bits must share one.
"""

from __future__ import annotations

from collections.abc import Iterable

from rmqwire.codec.codes import RequestCode

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

#: Request codes only admin accounts may send (Java ``Permission.ADMIN_CODE``).
ADMIN_CODES: frozenset[int] = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
})

_BY_NAME = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"


class AclError(ValueError):
    """Java ``AclException``: a refused request (its message is the remark) or a bad ACL file."""


def parse_perm(text: str | None) -> int:
    """Java ``parsePermFromString``: missing or unknown words mean DENY."""
    if text is None:
        return DENY
    return _BY_NAME.get(text.strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def needs_admin(code: int) -> bool:
    return code in ADMIN_CODES


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def is_retry_topic(resource: str | None) -> bool:
    return resource is not None and resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def print_resource(resource: str, is_group: bool) -> str:
    """Java ``PlainAccessResource.printStr``: ``topic:<t>`` or ``group:<g>``."""
    if is_group:
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}"
    return f"topic:{resource}"


def parse_resource_perms(entries: Iterable[str], *, is_topic: bool) -> dict[str, int]:
    """``topicPerms`` / ``groupPerms`` entries (``name=PERM``) to resource -> bits; a group is
    keyed by its retry topic, as Java keys it."""
    table: dict[str, int] = {}
    for entry in entries:
        parts = [p for p in str(entry).split("=") if p]   # Java StringUtils.split drops empties
        if len(parts) != 2:
            kind = "topic" if is_topic else "group"
            raise AclError(f"Parse resource permission failed for {kind}:{entry}")
        name = parts[0].strip()
        table[name if is_topic else RETRY_GROUP_TOPIC_PREFIX + name] = parse_perm(parts[1].strip())
    return table
