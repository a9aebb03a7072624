"""RemotingConfig.tls: a typed call over TLS between RemotingClient and RemotingServer, in memory.

The handshake really runs (pyOpenSSL through TLSMemoryBIOFactory); the bytes travel through
twisted.test.iosim instead of sockets, so no reactor thread is involved.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from twisted.internet import ssl
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.testing import MemoryReactorClock
from twisted.test.iosim import ConnectionCompleter

from rmqwire.codec.commands import BrokerData, GetRouteInfo, TopicRouteData
from rmqwire.errors import TopicNotExistError
from rmqwire.remoting import JAVA_SERVER_CONFIG, Processor, RemotingClient, RemotingConfig, RemotingServer

ROUTE = TopicRouteData(broker_datas=[BrokerData(broker_name="b", broker_addrs={0: "127.0.0.1:10911"})])


def _self_signed(host: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


class Routes(Processor):
    @GetRouteInfo.responder
    def route(self, header: Any, body: None, context: Any) -> TopicRouteData:
        if header.topic != "T":
            raise TopicNotExistError(remark=f"no route for {header.topic}")
        return ROUTE


def _pair(client_tls: Any) -> tuple[MemoryReactorClock, RemotingServer, RemotingClient]:
    key_pem, cert_pem = _self_signed("localhost")
    reactor = MemoryReactorClock()
    server_tls = ssl.PrivateCertificate.loadPEM(key_pem + cert_pem).options()
    server = RemotingServer(
        reactor, JAVA_SERVER_CONFIG.replace(tls=server_tls), processors=(Routes(),), port=10911
    )
    server.startService()
    if client_tls == "trusting":
        client_tls = ssl.optionsForClientTLS("localhost", trustRoot=ssl.Certificate.loadPEM(cert_pem))
    client = RemotingClient(reactor, RemotingConfig(tls=client_tls))
    client.startService()
    return reactor, server, client


def _settle(reactor: MemoryReactorClock, pump: Any) -> None:
    """Move bytes and run the TLS layer's zero-delay flushes until nothing moves (bounded)."""
    for _ in range(100):
        reactor.advance(0)
        if not pump.pump() and not any(c.getTime() <= reactor.seconds() for c in reactor.getDelayedCalls()):
            return
    raise AssertionError("the in-memory connection did not settle")


def test_typed_call_over_tls() -> None:
    reactor, server, client = _pair("trusting")
    d = client.call("127.0.0.1:10911", GetRouteInfo, topic="T")
    pump = ConnectionCompleter(reactor).succeedOnce()
    result: list[Any] = []
    d.addBoth(result.append)
    _settle(reactor, pump)
    assert result and not isinstance(result[0], BaseException), result
    assert result[0].body == ROUTE
    # Both channels really are TLS: their transports are TLS transports with a peer certificate.
    (server_channel,) = server.channels
    for channel in (client.channels["127.0.0.1:10911"], server_channel):
        assert ISSLTransport.providedBy(channel.transport)
    assert client.channels["127.0.0.1:10911"].transport.getPeerCertificate() is not None

    errors: list[Any] = []
    client.call("127.0.0.1:10911", GetRouteInfo, topic="X").addErrback(errors.append)
    _settle(reactor, pump)
    assert errors and errors[0].check(TopicNotExistError)
    client.close()
    server.close()
    _settle(reactor, pump)


def test_untrusted_server_certificate_fails_the_call() -> None:
    other_key, other_cert = _self_signed("localhost")
    wrong_root = ssl.optionsForClientTLS("localhost", trustRoot=ssl.Certificate.loadPEM(other_cert))
    reactor, server, client = _pair(wrong_root)
    d = client.call("127.0.0.1:10911", GetRouteInfo, topic="T", timeout=5.0)
    pump = ConnectionCompleter(reactor).succeedOnce()
    failures: list[Any] = []
    d.addErrback(failures.append)
    _settle(reactor, pump)
    reactor.advance(5.0)
    _settle(reactor, pump)
    assert failures, "the call must fail when the server's certificate is not trusted"
    assert not failures[0].check(TopicNotExistError)


@pytest.mark.parametrize("bad", [0, -1.0])
def test_config_rejects_bad_timeouts(bad: float) -> None:
    with pytest.raises(ValueError):
        RemotingConfig(call_timeout=bad)
