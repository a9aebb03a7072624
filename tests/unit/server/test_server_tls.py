"""TLS on the NameServer and Broker listeners over loopback (rmqwire's own TLS client):
``tls.server.mode`` disabled / permissive (TLS and plain TCP on one port) / enforcing, Java's
test-mode self-signed certificate, a configured certificate and key (also encrypted, also from a
tls.config.file), and clear errors for unusable files."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from rmqwire.client.blocking import call, ensure_reactor
from rmqwire.codec.commands import GetAllTopicListFromNameserver
from rmqwire.errors import RemotingError
from rmqwire.remoting import RemotingClient, RemotingConfig
from rmqwire.remoting.server import TlsMode
from rmqwire.server.namesrv import NameServer, NamesrvSettings
from rmqwire.server.tls import TlsConfigError, TlsSystemConfig


@pytest.fixture(scope="module")
def reactor() -> Any:
    return ensure_reactor()


def namesrv(reactor: Any, tmp_path: Path, **tls: str) -> NameServer:
    props = {"listenPort": "0", "bindAddress": "127.0.0.1", "kvConfigPath": str(tmp_path / "kv.json"),
             "tls.config.file": str(tmp_path / "absent.properties"), **tls}
    ns = NameServer(reactor, NamesrvSettings.from_properties(props))
    call(ns.startService, timeout=30)
    return ns


@pytest.fixture
def servers(reactor: Any) -> Iterator[list[NameServer]]:
    started: list[NameServer] = []
    yield started
    for ns in started:
        call(ns.stopService, timeout=30)


def topic_list(reactor: Any, ns: NameServer, tls: Any = None) -> Any:
    from twisted.internet.ssl import CertificateOptions

    creator = CertificateOptions(verify=False) if tls is True else tls
    client = call(lambda: RemotingClient(reactor, RemotingConfig(call_timeout=5, tls=creator)), timeout=10)
    try:
        return call(lambda: client.call(ns.address, GetAllTopicListFromNameserver), timeout=20)
    finally:
        call(client.close, timeout=10)


@pytest.mark.parametrize(("mode", "plain_ok", "tls_ok"), [
    ("permissive", True, True), ("enforcing", False, True), ("disabled", True, False)])
def test_server_modes(reactor: Any, servers: list[NameServer], tmp_path: Path, mode: str, plain_ok: bool,
                      tls_ok: bool) -> None:
    ns = namesrv(reactor, tmp_path, **{"tls.server.mode": mode})
    servers.append(ns)
    assert ns.server.tls_mode is TlsMode(mode)
    for tls, ok in ((None, plain_ok), (True, tls_ok)):
        if ok:
            assert topic_list(reactor, ns, tls).code == 0
        else:
            with pytest.raises(RemotingError):
                topic_list(reactor, ns, tls)


def write_cert(tmp_path: Path, password: bytes | None = None) -> tuple[Path, Path, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(7).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    enc = (serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption())
    cert_path, key_path = tmp_path / "server.pem", tmp_path / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc))
    return cert_path, key_path, cert


def verifying_client(cert_path: Path) -> Any:
    from twisted.internet.ssl import Certificate, optionsForClientTLS

    return optionsForClientTLS("localhost", trustRoot=Certificate.loadPEM(cert_path.read_bytes()))


def test_configured_certificate_from_the_tls_properties_file(reactor: Any, servers: list[NameServer],
                                                            tmp_path: Path) -> None:
    cert_path, key_path, _ = write_cert(tmp_path, password=b"key-pass")
    (tmp_path / "tls.properties").write_text(
        f"tls.test.mode.enable=false\ntls.server.certPath={cert_path}\ntls.server.keyPath={key_path}\n"
        "tls.server.keyPassword=key-pass\ntls.server.mode=disabled\n")   # the mode is not read from it
    ns = namesrv(reactor, tmp_path, **{"tls.server.mode": "enforcing",
                                       "tls.config.file": str(tmp_path / "tls.properties")})
    servers.append(ns)
    assert topic_list(reactor, ns, verifying_client(cert_path)).code == 0   # the client checks our cert
    (tmp_path / "other").mkdir()
    other, _, _ = write_cert(tmp_path / "other")
    with pytest.raises(RemotingError):
        topic_list(reactor, ns, verifying_client(other))


def test_test_mode_serves_a_self_signed_certificate(tmp_path: Path) -> None:
    cfg = TlsSystemConfig.from_properties({"tls.config.file": str(tmp_path / "none")})
    assert (cfg.mode, cfg.test_mode_enable, cfg.client_uses_tls) == (TlsMode.PERMISSIVE, True, False)
    assert cfg.server_context().getContext() is not None
    assert TlsSystemConfig.from_properties({"tls.server.mode": "bogus"}).mode is TlsMode.PERMISSIVE
    assert TlsSystemConfig.from_properties({"tls.server.mode": "disabled"}).server_context() is None
    assert TlsSystemConfig.from_properties({"tls.server.mode": "enforcing"}).client_uses_tls


def test_unusable_files_fail_with_a_reason(tmp_path: Path) -> None:
    base = {"tls.test.mode.enable": "false", "tls.config.file": str(tmp_path / "none")}
    with pytest.raises(TlsConfigError, match="are needed"):
        TlsSystemConfig.from_properties(base).server_context()
    cert_path, key_path, _ = write_cert(tmp_path, password=b"pw-123")
    with pytest.raises(TlsConfigError, match="not a usable PEM private key"):
        TlsSystemConfig.from_properties({**base, "tls.server.certPath": str(cert_path),
                                         "tls.server.keyPath": str(key_path)}).server_context()
    with pytest.raises(TlsConfigError, match="cannot read"):
        TlsSystemConfig.from_properties({**base, "tls.server.certPath": str(cert_path),
                                         "tls.server.keyPath": str(tmp_path / "missing.key")}).server_context()
    with pytest.raises(TlsConfigError, match="not usable"):
        TlsSystemConfig.from_properties({**base, "tls.server.certPath": str(tmp_path / "missing.pem"),
                                         "tls.server.keyPath": str(key_path),
                                         "tls.server.keyPassword": "pw-123"}).server_context()


def test_a_silent_connection_is_closed_after_the_idle_timeout(reactor: Any, servers: list[NameServer],
                                                              tmp_path: Path) -> None:
    import socket
    import time

    ns = namesrv(reactor, tmp_path, serverChannelMaxIdleTimeSeconds="1")
    servers.append(ns)
    with socket.create_connection(("127.0.0.1", ns.port), timeout=30) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""   # closed by the server without a byte sent either way
    assert time.monotonic() - started >= 0.9
    deadline = time.monotonic() + 30
    while call(lambda: len(ns.server._pending), timeout=10) and time.monotonic() < deadline:
        time.sleep(0.05)   # the server's side of the close is seen a moment later
    assert not call(lambda: len(ns.server._pending), timeout=10)
