"""TLS on rmqwire's NameServer and Broker listeners, judged by the official Java client
(``-Dtls.enable=true``: TLS to NameServers and brokers, any server certificate, as Java's test
mode) and official mqadmin.

One in-process rmqwire NameServer + Broker per ``tls.server.mode``:

- permissive: a Java producer and push consumer over TLS are served, and a plain Java producer on
  the same ports too (the first byte tells TLS from plain remoting, as Java's TlsModeHandler does);
- enforcing: the Java client over TLS is served (the broker registers with the NameServer over
  TLS as well), mqadmin over TLS lists the broker, and a plain Java producer gets nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rmqwire.admin.blocking import Admin
from rmqwire.client.blocking import call, ensure_reactor
from rmqwire.codec.commands.topic import TopicConfig
from rmqwire.remoting.server import TlsMode
from rmqwire.server.broker import Broker, BrokerSettings
from rmqwire.server.namesrv import NameServer, NamesrvSettings
from tools.peers.java_peer import JavaPeer
from tools.peers.process import PeerError
from tools.reference.mqadmin import parse_cluster_list, run_mqadmin

pytestmark = pytest.mark.conformance

JAVA_TLS = ["-Dtls.enable=true"]
#: A cold JVM's first TLS handshakes can take seconds on a loaded machine; its first NameServer
#: call and first send (each on a new TLS connection) must not time out at 3 s / 5 s because of it.
API_TIMEOUT = ["--api-timeout-ms", "30000", "--send-timeout-ms", "30000"]
SIZES = {"mappedFileSizeCommitLog": str(64 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(30_000 * 20)}


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@dataclass
class TlsCluster:
    mode: TlsMode
    namesrv: NameServer
    broker: Broker
    admin: Admin

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    def create_topic(self, queues: int = 2) -> str:
        """A new topic, created and routed through rmqwire's Admin over TLS."""
        topic = unique("tls")
        self.admin.create_and_update_topic_config(
            self.broker.address, TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues))
        route = self.admin.examine_topic_route_info(topic)
        assert route.queue_datas and route.queue_datas[0].write_queue_nums == queues
        return topic


@pytest.fixture(scope="module", params=["permissive", "enforcing"])
def tls_cluster(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    ensure_reactor()
    from twisted.internet import reactor

    work: Path = tmp_path_factory.mktemp(f"tls-{request.param}")
    tls = {"tls.server.mode": request.param, "tls.config.file": str(work / "no-tls.properties")}
    namesrv = NameServer(reactor, NamesrvSettings.from_properties({
        "listenPort": "0", "bindAddress": "127.0.0.1", "kvConfigPath": str(work / "kv.json"), **tls}))
    call(namesrv.startService, timeout=30)
    broker = admin = None
    try:
        broker = Broker(reactor, BrokerSettings.from_properties({
            "brokerName": f"rmqwire-tls-{request.param}", "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1",
            "listenPort": "0", "namesrvAddr": f"127.0.0.1:{namesrv.port}", "storePathRootDir": str(work / "store"),
            "storePathCommitLog": str(work / "store" / "commitlog"), **SIZES, **tls}))
        call(broker.startService, timeout=60)
        call(lambda: broker.registered, timeout=60)
        admin = Admin(f"127.0.0.1:{namesrv.port}", tls=True, timeout=10)
        admin.start()
        yield TlsCluster(TlsMode(request.param), namesrv, broker, admin)
    finally:
        if admin is not None:
            admin.shutdown()
        if broker is not None and broker.running:
            call(broker.stopService, timeout=60)
        call(namesrv.stopService, timeout=30)


def test_java_client_over_tls_is_served(tls_cluster: TlsCluster) -> None:
    assert tls_cluster.broker.server.tls_mode is tls_cluster.mode
    assert tls_cluster.broker.registrar.registrations >= 1   # over TLS when enforcing
    topic = tls_cluster.create_topic()
    with JavaPeer(tls_cluster.namesrv_addr, jvm_args=JAVA_TLS) as peer:
        sent = peer.produce(topic, 5, body="tls-{i}", extra=API_TIMEOUT)
        assert [r.status for r in sent] == ["SEND_OK"] * 5
        got = peer.consume(topic, 5, group=unique("tls_cg"), timeout_ms=90_000, extra=API_TIMEOUT)
    assert sorted(r.body for r in got) == sorted(f"tls-{i}".encode() for i in range(5))


def test_plain_java_client_by_mode(tls_cluster: TlsCluster) -> None:
    topic = tls_cluster.create_topic()
    with JavaPeer(tls_cluster.namesrv_addr) as peer:
        if tls_cluster.mode is TlsMode.PERMISSIVE:
            sent = peer.produce(topic, 3)
            assert [r.status for r in sent] == ["SEND_OK"] * 3
        else:
            with pytest.raises(PeerError):
                peer.produce(topic, 1, extra=["--send-timeout-ms", "3000"], timeout=120)
    stored = sum(call(tls_cluster.broker.store.get_max_offset_in_queue, topic, q, timeout=10) for q in range(2))
    assert stored == (3 if tls_cluster.mode is TlsMode.PERMISSIVE else 0)


def test_mqadmin_over_tls(tls_cluster: TlsCluster, reference_unavailable: Any) -> None:
    # mqadmin's first call has a fixed 3 s budget that includes a cold JVM's first TLS handshake,
    # which a loaded machine can exceed: a few attempts, one must succeed.
    for _ in range(3):
        result = run_mqadmin(tls_cluster.namesrv_addr, "clusterList", jvm_args=("-Dtls.enable=true",))
        if result.ok:
            break
    assert result.ok, result.stdout + result.stderr
    assert [row.addr for row in parse_cluster_list(result.stdout)] == [tls_cluster.broker.address]
