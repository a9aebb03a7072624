"""TLS of the NameServer and Broker listeners, configured as Java's ``TlsSystemConfig``.

Java reads these from system properties, then lets ``tls.config.file`` (default
``/etc/rocketmq/tls.properties``) override all but ``tls.server.mode`` and ``tls.enable``. Python
has no system properties, so the same keys are read from ``broker.conf`` / ``namesrv.properties``
(playing the system properties), then from the tls.config.file:

- ``tls.server.mode``: ``disabled``, ``permissive`` (default: TLS and plain TCP on one port) or
  ``enforcing`` (TLS only);
- ``tls.test.mode.enable`` (default true): serve a self-signed certificate made at start and ask
  no client certificate, as Java's test mode does; set false to use the keys below;
- ``tls.server.certPath`` / ``tls.server.keyPath`` / ``tls.server.keyPassword``: the PEM
  certificate chain and (PKCS#8 or traditional, optionally encrypted) private key;
- ``tls.server.need.client.auth`` (``none`` / ``optional`` / ``require``), ``tls.server.authClient``
  and ``tls.server.trustCertPath``: client certificates, verified against the trusted CA file;
- ``tls.enable``: the broker's own client (registration with NameServers) uses TLS; by default
  it does when the mode is enforcing (Java's NettyClientConfig default).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from zope.interface import implementer

from rmqwire.remoting.server import TlsMode

TLS_SERVER_MODE = "tls.server.mode"
TLS_ENABLE = "tls.enable"
TLS_CONFIG_FILE = "tls.config.file"
TLS_TEST_MODE_ENABLE = "tls.test.mode.enable"
TLS_SERVER_NEED_CLIENT_AUTH = "tls.server.need.client.auth"
TLS_SERVER_KEYPATH = "tls.server.keyPath"
TLS_SERVER_KEYPASSWORD = "tls.server.keyPassword"
TLS_SERVER_CERTPATH = "tls.server.certPath"
TLS_SERVER_AUTHCLIENT = "tls.server.authClient"
TLS_SERVER_TRUSTCERTPATH = "tls.server.trustCertPath"
DEFAULT_TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"

#: Keys the tls.config.file may set (Java's extractTlsConfigFromFile, server side).
_FILE_KEYS = (TLS_TEST_MODE_ENABLE, TLS_SERVER_NEED_CLIENT_AUTH, TLS_SERVER_KEYPATH, TLS_SERVER_KEYPASSWORD,
              TLS_SERVER_CERTPATH, TLS_SERVER_AUTHCLIENT, TLS_SERVER_TRUSTCERTPATH)


class TlsConfigError(ValueError):
    """The TLS settings cannot give a server context (a missing or unreadable file, a bad key)."""


def _bool(text: str | None, default: bool) -> bool:
    return default if text is None else text.strip().lower() == "true"


@dataclasses.dataclass(frozen=True, slots=True)
class TlsSystemConfig:
    mode: TlsMode = TlsMode.PERMISSIVE
    #: None: not given (the broker's client then uses TLS only when the mode is enforcing)
    enable: bool | None = None
    test_mode_enable: bool = True
    server_need_client_auth: str = "none"
    server_key_path: str | None = None
    server_key_password: str | None = dataclasses.field(default=None, repr=False)
    server_cert_path: str | None = None
    server_auth_client: bool = False
    server_trust_cert_path: str | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsSystemConfig:
        """The config from a server's properties, overridden by its tls.config.file."""
        # here, not at the top: rmqwire.server.namesrv imports this module
        from rmqwire.server.namesrv.config import parse_properties

        merged = dict(props)
        path = Path(props.get(TLS_CONFIG_FILE, DEFAULT_TLS_CONFIG_FILE))
        if path.is_file() and os.access(path, os.R_OK):
            try:
                from_file = parse_properties(path.read_text(encoding="latin-1"))
            except (OSError, ValueError) as e:
                raise TlsConfigError(f"cannot read {path}: {e}") from None
            merged.update({k: v for k, v in from_file.items() if k in _FILE_KEYS})
        enable = merged.get(TLS_ENABLE)
        return cls(
            mode=TlsMode.parse(merged.get(TLS_SERVER_MODE, TlsMode.PERMISSIVE.value).strip()),
            enable=None if enable is None else _bool(enable, False),
            test_mode_enable=_bool(merged.get(TLS_TEST_MODE_ENABLE), True),
            server_need_client_auth=merged.get(TLS_SERVER_NEED_CLIENT_AUTH, "none").strip().lower() or "none",
            server_key_path=merged.get(TLS_SERVER_KEYPATH) or None,
            server_key_password=merged.get(TLS_SERVER_KEYPASSWORD) or None,
            server_cert_path=merged.get(TLS_SERVER_CERTPATH) or None,
            server_auth_client=_bool(merged.get(TLS_SERVER_AUTHCLIENT), False),
            server_trust_cert_path=merged.get(TLS_SERVER_TRUSTCERTPATH) or None,
        )

    @property
    def client_uses_tls(self) -> bool:
        """Java's NettyClientConfig default: ``tls.enable``, else whether the mode is enforcing."""
        return self.enable if self.enable is not None else self.mode is TlsMode.ENFORCING

    def server_context(self) -> Any:
        """A Twisted server context factory, or None when the mode is disabled."""
        if self.mode is TlsMode.DISABLED:
            return None
        return ServerContextFactory(self)


@implementer(IOpenSSLServerConnectionCreator)
class ServerContextFactory:
    """One OpenSSL server context, built at once so that a bad file fails the server's start."""

    def __init__(self, cfg: TlsSystemConfig) -> None:
        from OpenSSL import SSL

        ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        ctx.set_options(SSL.OP_NO_COMPRESSION)
        try:
            if cfg.test_mode_enable:
                cert, key = self_signed_certificate()
                ctx.use_certificate(cert)
                ctx.use_privatekey(key)
            else:
                if not cfg.server_cert_path or not cfg.server_key_path:
                    raise TlsConfigError(f"{TLS_SERVER_CERTPATH} and {TLS_SERVER_KEYPATH} are needed when "
                                         f"{TLS_TEST_MODE_ENABLE}=false")
                ctx.use_certificate_chain_file(cfg.server_cert_path.encode())
                ctx.use_privatekey(_load_key(cfg.server_key_path, cfg.server_key_password))
                ctx.check_privatekey()
                self._client_auth(ctx, cfg)
        except SSL.Error as e:
            raise TlsConfigError(f"TLS certificate or key not usable: {e}") from None
        self._context = ctx

    @staticmethod
    def _client_auth(ctx: Any, cfg: TlsSystemConfig) -> None:
        from OpenSSL import SSL

        mode = cfg.server_need_client_auth
        if mode not in ("optional", "require"):
            return
        if cfg.server_auth_client and cfg.server_trust_cert_path:
            ctx.load_verify_locations(cfg.server_trust_cert_path.encode())
        flags = SSL.VERIFY_PEER | (SSL.VERIFY_FAIL_IF_NO_PEER_CERT if mode == "require" else 0)
        # Without authClient Java trusts any client certificate: accept whatever chain is shown.
        ctx.set_verify(flags, None if cfg.server_auth_client else _accept_any)

    def serverConnectionForTLS(self, tls_protocol: Any) -> Any:  # noqa: N802 - Twisted's interface
        from OpenSSL import SSL

        return SSL.Connection(self._context, None)

    def getContext(self) -> Any:  # noqa: N802
        return self._context


def _accept_any(conn: Any, cert: Any, errno: int, depth: int, ok: int) -> bool:
    return True


def _load_key(path: str, password: str | None) -> Any:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"cannot read {TLS_SERVER_KEYPATH} {path}: {e}") from None
    try:
        return load_pem_private_key(data, password.encode() if password else None)
    except (ValueError, TypeError) as e:
        raise TlsConfigError(f"{TLS_SERVER_KEYPATH} {path} is not a usable PEM private key: {e}") from None


def self_signed_certificate(common_name: str = "localhost") -> tuple[Any, Any]:
    """A fresh self-signed certificate and its key (Java test mode's SelfSignedCertificate; an EC
    P-256 key here, made in milliseconds)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key
