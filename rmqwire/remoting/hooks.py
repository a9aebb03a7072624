"""RPC hooks: the ACL signing hook of the Java client (``AclClientRPCHook``)."""

from __future__ import annotations

import dataclasses

from rmqwire.codec.acl import sign_command
from rmqwire.codec.frame import RemotingCommand


@dataclasses.dataclass(frozen=True, slots=True)
class AclClientRPCHook:
    """Signs every request exactly as Java's ``AclClientRPCHook`` (wire-format.md section 11.2).

    ``broker_4x`` leaves ``_UNIQUE_KEY_QUERY`` out of the signed content while still sending it,
    because a 4.x plain-ACL broker strips that key before verifying (section 11.3).
    """

    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    security_token: str | None = dataclasses.field(default=None, repr=False)
    broker_4x: bool = False

    def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return sign_command(
            request,
            self.access_key,
            self.secret_key,
            self.security_token,
            drop_unique_key_query=self.broker_4x,
        )

    def after_response(
        self, addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        return None
