"""The 4.x plain ACL of a broker (Java ``PlainAccessValidator`` + ``PlainPermissionManager``).

Accounts come from ``plain_acl.yml`` files in the official shape::

    globalWhiteRemoteAddresses: ["10.10.103.*"]
    accounts:
      - accessKey: RocketMQ
        secretKey: "12345678"
        whiteRemoteAddress: ""
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: ["topicA=DENY", "topicB=PUB|SUB"]
        groupPerms: ["groupA=DENY", "groupB=PUB|SUB"]

read from ``<rocketmqHome>/conf/plain_acl.yml`` (``rocketmq.acl.plain.file``, relative to the home,
changes it) and every ``*.yml`` / ``*.yaml`` under ``<rocketmqHome>/conf/acl``; an access key
defined twice keeps its first definition. Files are re-read when they change.

Each request is checked before any processor sees it (``before_request``: a server-side RPC
hook, as Java's broker registers one): a request from a globally white-listed address passes; else
it needs a known AccessKey; an address on the account's own white list passes; else the Signature
must be the HMAC-SHA1 of the request as ``AclClientRPCHook`` computes it, and the account must
hold the permissions the request code needs (``parse_request``; admin codes need an admin account).
A refusal answers 16 NO_PERMISSION whose remark is Java's AclException text (a 4.x broker answers
1 SYSTEM_ERROR with the same text and a stack frame). Secret keys are never logged or printed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from twisted.logger import Logger

from rmqwire.codec.acl import (
    ACCESS_KEY,
    verifier_strips_unique_key_query,
    verify_command,
)
from rmqwire.codec.codes import RequestCode, ResponseCode
from rmqwire.codec.commands.heartbeat import HeartbeatData
from rmqwire.codec.frame import RemotingCommand
from rmqwire.errors import CodecError, for_code
from rmqwire.server.acl.permission import (
    DENY,
    PUB,
    SUB,
    AclError,
    check_permission,
    is_retry_topic,
    needs_admin,
    parse_perm,
    parse_resource_perms,
    print_resource,
    retry_topic,
)
from rmqwire.server.acl.remote_address import AddressMatcher, address_matcher

__all__ = [
    "ACL_EXCEPTION",
    "DEFAULT_PLAIN_ACL_FILE",
    "AccessRequest",
    "PlainAccessValidator",
    "PlainAccount",
    "PlainAclConfig",
    "acl_files",
    "load_plain_acl",
    "parse_request",
]

#: The exception class a Java broker names in its refusal remark.
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
#: Java's ``rocketmq.acl.plain.file`` default, relative to the RocketMQ home.
DEFAULT_PLAIN_ACL_FILE = "conf/plain_acl.yml"
#: Java ``AclConstants.ACCESS_KEY_MIN_LENGTH`` / ``SECRET_KEY_MIN_LENGTH``: longer than 6.
_KEY_MIN_LENGTH = 6
#: Sends to this topic with PUB skip the permission check (message traces; Java does the same).
_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


@dataclasses.dataclass(frozen=True, slots=True)
class PlainAccount:
    """One account (Java ``PlainAccessResource`` built from a ``PlainAccessConfig``)."""

    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    #: topic -> bits, and %RETRY%group -> bits for groups
    resource_perms: Mapping[str, int] = dataclasses.field(default_factory=dict)
    white_remote_address: str | None = None
    matcher: AddressMatcher = dataclasses.field(default=address_matcher(None), repr=False, compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class PlainAclConfig:
    accounts: Mapping[str, PlainAccount] = dataclasses.field(default_factory=dict)
    global_white: tuple[AddressMatcher, ...] = dataclasses.field(default=(), repr=False)
    global_white_remote_addresses: tuple[str, ...] = ()


def acl_files(home: str | os.PathLike[str] | None, plain_file: str = DEFAULT_PLAIN_ACL_FILE) -> list[Path]:
    """The files Java reads: every yml/yaml under ``<home>/conf/acl`` (sorted), then the plain
    file if it exists and is not among them."""
    if not home:
        return []
    root = Path(home)
    found = sorted(p for p in (root / "conf" / "acl").rglob("*")
                   if p.is_file() and p.suffix in (".yml", ".yaml")) if (root / "conf" / "acl").is_dir() else []
    main = root / plain_file
    if main.is_file() and main not in found:
        found.append(main)
    return found


def _text(value: Any) -> str | None:
    """A YAML scalar as fastjson turns it into a Java String field."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclError(f"{what} must be a list, got {type(value).__name__}")
    return [s for s in (_text(v) for v in value) if s is not None]


def _account(entry: Any) -> PlainAccount:
    if not isinstance(entry, Mapping):
        raise AclError(f"an accounts entry must be a mapping, got {type(entry).__name__}")
    access_key, secret_key = _text(entry.get("accessKey")), _text(entry.get("secretKey"))
    if (access_key is None or secret_key is None or len(access_key) <= _KEY_MIN_LENGTH
            or len(secret_key) <= _KEY_MIN_LENGTH):
        # Java's message prints the secret; ours never does.
        raise AclError(f"The accessKey={access_key} and its secretKey cannot be null and length "
                       f"should longer than {_KEY_MIN_LENGTH}")
    admin = entry.get("admin", False)
    white = _text(entry.get("whiteRemoteAddress"))
    perms = parse_resource_perms(_strings(entry.get("groupPerms"), "groupPerms"), is_topic=False)
    perms.update(parse_resource_perms(_strings(entry.get("topicPerms"), "topicPerms"), is_topic=True))
    return PlainAccount(
        access_key=access_key,
        secret_key=secret_key,
        admin=admin is True or (isinstance(admin, str) and admin.lower() == "true"),
        default_topic_perm=parse_perm(_text(entry.get("defaultTopicPerm"))),
        default_group_perm=parse_perm(_text(entry.get("defaultGroupPerm"))),
        resource_perms=perms,
        white_remote_address=white,
        matcher=address_matcher(white),
    )


def load_plain_acl(files: Iterable[str | os.PathLike[str]]) -> PlainAclConfig:
    """Read ``files`` (Java's load): AclError names the file and what is wrong with it."""
    accounts: dict[str, PlainAccount] = {}
    white: list[AddressMatcher] = []
    white_text: list[str] = []
    for path in files:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise AclError(f"cannot read ACL file {path}: {e}") from None
        if not data:
            continue
        if not isinstance(data, Mapping):
            raise AclError(f"ACL file {path}: the top level must be a mapping")
        try:
            addresses = _strings(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")
            white += [address_matcher(a) for a in addresses]
            white_text += addresses
            entries = data.get("accounts") or []
            if not isinstance(entries, list):
                raise AclError("accounts must be a list")
            for entry in entries:
                account = _account(entry)
                accounts.setdefault(account.access_key, account)   # first definition wins
        except AclError as e:
            raise AclError(f"ACL file {path}: {e}") from None
    return PlainAclConfig(accounts, tuple(white), tuple(white_text))


# ---- requests --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class AccessRequest:
    """What one request asks for (Java ``PlainAccessResource`` from ``PlainAccessValidator.parse``)."""

    code: int
    remote_address: str
    access_key: str | None = None
    #: resource (topic, or %RETRY%group for a group) -> the bits needed; None: nothing named
    resources: Mapping[str, int] | None = None


def _host(peer: str) -> str:
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")


def parse_request(request: RemotingCommand, peer: str) -> AccessRequest:
    """The resources ``request`` needs, by request code (Java ``PlainAccessValidator.parse``)."""
    ext = request.ext_fields
    remote = _host(peer)
    if ext is None:
        return AccessRequest(request.code, remote)
    need: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:
            need[resource] = perm

    code = request.code
    try:
        if code == RequestCode.SEND_MESSAGE:
            topic = ext.get("topic")
            add(retry_topic(ext.get("group")) if is_retry_topic(topic) else topic,
                SUB if is_retry_topic(topic) else PUB)
        elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            # Java 4.9.7 leaves SEND_BATCH_MESSAGE unchecked; a batch needs what a single send needs.
            topic = ext.get("b")
            add(retry_topic(ext.get("a")) if is_retry_topic(topic) else topic,
                SUB if is_retry_topic(topic) else PUB)
        elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
            add(retry_topic(ext.get("group")), SUB)
        elif code == RequestCode.PULL_MESSAGE:
            add(ext.get("topic"), SUB)
            add(retry_topic(ext.get("consumerGroup")), SUB)
        elif code == RequestCode.QUERY_MESSAGE:
            add(ext.get("topic"), SUB)
        elif code == RequestCode.HEART_BEAT:
            heartbeat = HeartbeatData.decode(request.body or b"")
            for data in heartbeat.consumer_data_set or ():
                add(retry_topic(data.group_name), SUB)
                for sub in data.subscription_data_set or ():
                    add(sub.topic, SUB)
        elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
            add(retry_topic(ext.get("consumerGroup")), SUB)
        elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
            add(retry_topic(ext.get("consumerGroup")), SUB)
            add(ext.get("topic"), SUB)
    except (CodecError, ValueError, TypeError) as e:
        raise AclError(str(e)) from None
    return AccessRequest(code, remote, ext.get(ACCESS_KEY), need or None)


# ---- the validator ---------------------------------------------------------------------------------


class PlainAccessValidator:
    """The broker's ACL check, as a server-side RPC hook (``Dispatcher.add_hook``).

    ``files`` are re-read by ``reload_if_changed`` (the broker calls it periodically, as Java's
    AclFileWatchService); a file that no longer parses keeps the previous accounts.
    """

    log = Logger()

    def __init__(self, files: Sequence[str | os.PathLike[str]] = (), *,
                 config: PlainAclConfig | None = None) -> None:
        self.files = tuple(Path(f) for f in files)
        self._stamps = self._file_stamps()
        self.config = config if config is not None else load_plain_acl(self.files)

    @classmethod
    def for_home(cls, home: str | os.PathLike[str] | None,
                 plain_file: str = DEFAULT_PLAIN_ACL_FILE) -> PlainAccessValidator:
        if not home:
            raise AclError("aclEnable needs rocketmqHome (ROCKETMQ_HOME): the ACL files are read "
                           f"from <rocketmqHome>/{plain_file} and <rocketmqHome>/conf/acl")
        files = acl_files(home, plain_file)
        main = Path(home) / plain_file
        return cls(files if main in files else [*files, main])

    def _file_stamps(self) -> tuple[tuple[int, int] | None, ...]:
        stamps: list[tuple[int, int] | None] = []
        for f in self.files:
            try:
                st = f.stat()
                stamps.append((st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def reload_if_changed(self) -> bool:
        stamps = self._file_stamps()
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        try:
            self.config = load_plain_acl(self.files)
        except AclError as e:
            self.log.error("ACL files changed but cannot be loaded, keeping the previous accounts: {e}", e=e)
            return False
        self.log.info("ACL files reloaded: {n} account(s)", n=len(self.config.accounts))
        return True

    # ---- checks ----------------------------------------------------------------------------------

    def validate(self, request: RemotingCommand, peer: str) -> None:
        """Raise AclError (Java's message) unless ``request`` from ``peer`` may be processed."""
        access = parse_request(request, peer)
        config = self.config
        if any(match(access.remote_address) for match in config.global_white):
            return
        if access.access_key is None:
            raise AclError("No accessKey is configured")
        owned = config.accounts.get(access.access_key)
        if owned is None:
            raise AclError(f"No acl config for {access.access_key}")
        if owned.matcher(access.remote_address):
            return
        strip = verifier_strips_unique_key_query(request.version)
        try:
            signed = verify_command(request, owned.secret_key, strip_unique_key_query=strip)
        except CodecError:
            signed = False
        if not signed:
            raise AclError(f"Check signature failed for accessKey={access.access_key}")
        if access.resources is not None and access.resources.get(_TRACE_TOPIC) == PUB:
            return
        self.check_perm(access, owned)

    @staticmethod
    def check_perm(access: AccessRequest, owned: PlainAccount) -> None:
        """Java ``PlainPermissionManager.checkPerm``."""
        if needs_admin(access.code) and not owned.admin:
            raise AclError(f"Need admin permission for request code={access.code}, "
                           f"but accessKey={owned.access_key} is not")
        if access.resources is None:
            return
        for resource, needed in access.resources.items():
            is_group = is_retry_topic(resource)
            have = owned.resource_perms.get(resource)
            if have is None:
                have = owned.default_group_perm if is_group else owned.default_topic_perm
            if not check_permission(needed, have):
                raise AclError(f"No default permission for {print_resource(resource, is_group)}")

    # ---- RPC hook ----------------------------------------------------------------------------------

    def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        try:
            self.validate(request, addr)
        except AclError as e:
            raise for_code(ResponseCode.NO_PERMISSION, f"{ACL_EXCEPTION}: {e}") from None
        return request

    def after_response(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
        return None
