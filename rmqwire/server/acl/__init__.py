"""Access control of rmqwire's broker: the 4.x plain ACL (``aclEnable`` + ``plain_acl.yml``)."""

from rmqwire.server.acl.permission import AclError
from rmqwire.server.acl.plain import (
    ACL_EXCEPTION,
    PlainAccessValidator,
    PlainAccount,
    PlainAclConfig,
    load_plain_acl,
)

__all__ = [
    "ACL_EXCEPTION",
    "AclError",
    "PlainAccessValidator",
    "PlainAccount",
    "PlainAclConfig",
    "load_plain_acl",
]
