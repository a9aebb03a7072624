"""Client options shared by producers and consumers (Java ``ClientConfig``), and the local address.

Names are Java's in snake_case; times stay in milliseconds as in Java so that values copied from a
Java configuration mean the same thing. ``remoting_config()`` turns the options into the one
``RemotingConfig`` the client instance's ``RemotingClient`` uses.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from rmqwire.codec.codes import LanguageCode, SerializeType
from rmqwire.codec.ids import build_client_id
from rmqwire.remoting.config import RemotingConfig
from rmqwire.remoting.hooks import AclClientRPCHook

#: Java's ``MixAll.DEFAULT_TRACE_REGION_ID`` (send results without a MSG_REGION extField).
DEFAULT_REGION_ID = "DefaultRegion"


def local_address() -> str:
    """This host's address as a client reports it (Java ``NetworkUtil.getLocalAddress``).

    Java enumerates interfaces and prefers a non-loopback IPv4 address; the stdlib cannot list
    interface addresses, so the address of the interface that routes outward is taken (a UDP
    "connect" sends nothing), then the host name's address, then loopback.
    """
    for probe in ("10.255.255.255", "192.0.2.255"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                ip = s.getsockname()[0]
                if ip and not ip.startswith("127.") and ip != "0.0.0.0":
                    return ip
        except OSError:
            continue
    try:
        ip = socket.gethostbyname(socket.gethostname())
        if ip:
            return ip
    except OSError:
        pass
    return "127.0.0.1"


def parse_namesrv_addr(addr: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"h1:9876;h2:9876"`` (Java's separator) or a sequence -> the address tuple."""
    if addr is None:
        return ()
    items = addr.split(";") if isinstance(addr, str) else list(addr)
    return tuple(a.strip() for a in items if a and a.strip())


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Options of Java's ``ClientConfig`` that apply here (defaults as Java's).

    - ``instance_name``: ``"DEFAULT"`` becomes ``<pid>#<nanotime>`` when a producer or consumer
      starts (``resolved()``), so every client gets its own client instance unless a name is set.
    - ``client_ip``: None finds it as ``local_address()`` does.
    - ``access_key``/``secret_key``: sign every request as Java's ``AclClientRPCHook``.
    - ``use_tls``: TLS to NameServers and brokers; ``tls`` may give a Twisted connection creator
      (default: Java's test-mode behaviour, which trusts any server certificate).
    - Intervals and timeouts are milliseconds, as in Java.
    """

    namesrv_addr: str | tuple[str, ...] | None = None
    client_ip: str | None = None
    instance_name: str = "DEFAULT"
    unit_name: str | None = None
    unit_mode: bool = False
    namespace: str | None = None
    vip_channel_enabled: bool = False
    poll_name_server_interval: int = 30_000
    heartbeat_broker_interval: int = 30_000
    persist_consumer_offset_interval: int = 5_000
    pull_time_delay_mills_when_exception: int = 1_000
    mq_client_api_timeout: int = 3_000
    language: LanguageCode = LanguageCode.PYTHON
    serialize_type: SerializeType = SerializeType.JSON
    use_tls: bool = False
    tls: Any = None
    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    security_token: str | None = dataclasses.field(default=None, repr=False)
    max_inflight: int = 65_535
    #: Client metrics (rmqwire.client.metrics): None (off), True (prometheus-client's default
    #: registry) or a CollectorRegistry.
    metrics: Any = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "namesrv_addr", parse_namesrv_addr(self.namesrv_addr))
        object.__setattr__(self, "serialize_type", SerializeType(self.serialize_type))
        object.__setattr__(self, "language", LanguageCode(self.language))
        if bool(self.access_key) != bool(self.secret_key):
            raise ValueError("access_key and secret_key go together")
        for name in ("poll_name_server_interval", "heartbeat_broker_interval",
                     "persist_consumer_offset_interval", "mq_client_api_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def namesrv_addrs(self) -> tuple[str, ...]:
        return self.namesrv_addr  # type: ignore[return-value]  # normalised in __post_init__

    def replace(self, **changes: Any) -> ClientConfig:
        return dataclasses.replace(self, **changes)

    def resolved(self) -> ClientConfig:
        """Java's ``changeInstanceNameToPID`` and the client IP, done once at start."""
        changes: dict[str, Any] = {}
        if self.instance_name == "DEFAULT":
            changes["instance_name"] = f"{os.getpid()}#{time.monotonic_ns()}"
        if self.client_ip is None:
            changes["client_ip"] = local_address()
        return self.replace(**changes) if changes else self

    def client_id(self) -> str:
        """Java ``buildMQClientId``: ``ip@instanceName[@unitName]`` (call on a resolved config)."""
        return build_client_id(self.client_ip or local_address(), self.instance_name, self.unit_name)

    def remoting_config(self) -> RemotingConfig:
        hooks = ()
        if self.access_key:
            hooks = (AclClientRPCHook(self.access_key, self.secret_key or "", self.security_token),)
        tls = self.tls
        if tls is None and self.use_tls:
            from twisted.internet.ssl import CertificateOptions

            # Java clients default to tls.test.mode.enable=true: any server certificate is taken.
            tls = CertificateOptions(verify=False)
        return RemotingConfig(
            serialize_type=self.serialize_type,
            language=self.language,
            call_timeout=self.mq_client_api_timeout / 1000,
            tls=tls,
            rpc_hooks=hooks,
            max_inflight=self.max_inflight,
        )


def with_namespace(namespace: str | None, resource: str) -> str:
    """Java ``NamespaceUtil.wrapNamespace``: ``ns%topic`` (``%RETRY%ns%group`` for retry topics).

    System topics and groups, and names already in the namespace, are left alone.
    """
    if not namespace or not resource or _is_system_resource(resource):
        return resource
    bare = _without_retry_and_dlq(resource)
    if bare.startswith(namespace + "%"):
        return resource
    prefix = ""
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        prefix = RETRY_GROUP_TOPIC_PREFIX
    elif resource.startswith(DLQ_GROUP_TOPIC_PREFIX):
        prefix = DLQ_GROUP_TOPIC_PREFIX
    return f"{prefix}{namespace}%{bare}"


def without_namespace(resource: str, namespace: str | None = None) -> str:
    """Java ``NamespaceUtil.withoutNamespace``: strip ``ns%`` (only ``namespace``'s when given)."""
    if not resource or _is_system_resource(resource):
        return resource
    bare = _without_retry_and_dlq(resource)
    if namespace is not None:
        if not namespace or not bare.startswith(namespace + "%"):
            return resource
    index = bare.find("%")
    if index <= 0:
        return resource
    prefix = ""
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        prefix = RETRY_GROUP_TOPIC_PREFIX
    elif resource.startswith(DLQ_GROUP_TOPIC_PREFIX):
        prefix = DLQ_GROUP_TOPIC_PREFIX
    return prefix + bare[index + 1 :]


RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
#: Java ``MixAll.CID_RMQ_SYS_PREFIX``: system consumer groups.
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"


def _without_retry_and_dlq(resource: str) -> str:
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return resource[len(RETRY_GROUP_TOPIC_PREFIX) :]
    if resource.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return resource[len(DLQ_GROUP_TOPIC_PREFIX) :]
    return resource


def _is_system_resource(resource: str) -> bool:
    from rmqwire.client.validators import is_system_topic

    return is_system_topic(resource) or resource.startswith(SYS_GROUP_PREFIX)
