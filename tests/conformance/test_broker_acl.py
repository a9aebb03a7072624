"""rmqwire's Broker with ACL on, and its refusal of remote config updates, judged by the official
Java client (AclClientRPCHook), official mqadmin and the public exploit shapes.

- ACL: an in-process rmqwire NameServer + Broker (``aclEnable=true``, a ``plain_acl.yml`` in the
  official 4.x shape, 127.0.0.1 not white-listed). The Java producer and push consumer signing
  with the right secret are served; with a wrong secret, none, or no permission on the topic the
  send is answered 16 NO_PERMISSION with Java's AclException text and nothing is stored; mqadmin
  signing with an admin account creates topics and reads broker status, with a plain account it
  is refused.
- CVE-2023-33246: ``rmqwire broker -c broker.conf`` (a process, as users run it) answers the
  exploit's UPDATE_BROKER_CONFIG (rocketmqHome / filterServerNums, paths) NO_PERMISSION, with
  ``enableUpdateBrokerConfig`` off and on; broker.conf's bytes and the effective config stay as
  they were. CVE-2023-37582: the NameServer refuses configStorePath / kvConfigPath the same way
  and writes nothing at the exploit's path.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rmqwire.client.blocking import call, ensure_reactor
from rmqwire.codec import RemotingCommand, RequestCode, ResponseCode
from rmqwire.codec.commands import GetMaxOffset, UpdateAndCreateTopic
from rmqwire.errors import NoPermissionError
from rmqwire.remoting.hooks import AclClientRPCHook
from rmqwire.server.acl import ACL_EXCEPTION
from rmqwire.server.broker import Broker, BrokerSettings
from rmqwire.server.namesrv import NameServer, NamesrvSettings
from tools.peers.java_peer import JavaPeer
from tools.peers.process import PeerError
from tools.peers.topics import wait_for_route
from tools.reference import wire
from tools.reference.cluster import AclAccount, PlainAcl
from tools.reference.mqadmin import run_mqadmin
from tools.rmqwire_broker import RmqwireBroker

pytestmark = pytest.mark.conformance

TIMEOUT = 15.0
ADMIN = AclClientRPCHook("rmqwire_admin", "admin-secret-123")
USER = AclClientRPCHook("rmqwire_user", "user-secret-456")
TOPIC_PREFIX = "acl_ok"   # the user may PUB|SUB topics named acl_ok*: listed one by one below
SIZES = {"mappedFileSizeCommitLog": str(64 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(30_000 * 20)}


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# Topics are named up front so that the user's topicPerms can list them.
USER_TOPIC = unique(TOPIC_PREFIX)
DENIED_TOPIC = unique("acl_denied")


@dataclass
class AclCluster:
    namesrv: NameServer
    broker: Broker
    home: Path

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    @property
    def broker_addr(self) -> str:
        return self.broker.address

    def signed(self, hook: AclClientRPCHook | None, command: Any, header: Any = None, *,
               body: Any = None, **fields: Any) -> Any:
        """``command`` to the broker signed by ``hook`` (None: unsigned): typed response or error."""
        cmd: RemotingCommand = command.request(header, body, **fields)
        if hook is not None:
            cmd = hook.before_request(self.broker_addr, cmd)
        return command.parse_response(wire.send(self.broker_addr, cmd, TIMEOUT))

    def create_topic(self, topic: str, queues: int = 2) -> None:
        self.signed(ADMIN, UpdateAndCreateTopic, topic=topic, default_topic="TBW102",
                    read_queue_nums=queues, write_queue_nums=queues, perm=6,
                    topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False)
        wait_for_route(self.namesrv_addr, topic, queues=queues, timeout=30)

    def stored(self, topic: str, queues: int = 2) -> int:
        return sum(call(self.broker.store.get_max_offset_in_queue, topic, q, timeout=10) for q in range(queues))


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    ensure_reactor()
    from twisted.internet import reactor

    work = tmp_path_factory.mktemp("acl")
    home = work / "home"
    (home / "conf").mkdir(parents=True)
    acl = PlainAcl(accounts=(
        AclAccount(ADMIN.access_key, ADMIN.secret_key, admin=True,
                   default_topic_perm="PUB|SUB", default_group_perm="PUB|SUB"),
        AclAccount(USER.access_key, USER.secret_key, admin=False, default_topic_perm="DENY",
                   default_group_perm="SUB", topic_perms=(f"{USER_TOPIC}=PUB|SUB", f"{DENIED_TOPIC}=SUB")),
    ))
    (home / "conf" / "plain_acl.yml").write_text(acl.to_yaml())
    namesrv = NameServer(reactor, NamesrvSettings.from_properties({
        "listenPort": "0", "bindAddress": "127.0.0.1", "kvConfigPath": str(work / "kv.json")}))
    call(namesrv.startService, timeout=30)
    broker = None
    try:
        settings = BrokerSettings.from_properties({
            "brokerName": "rmqwire-acl", "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1",
            "listenPort": "0", "namesrvAddr": f"127.0.0.1:{namesrv.port}", "aclEnable": "true",
            "rocketmqHome": str(home), "storePathRootDir": str(work / "store"),
            "storePathCommitLog": str(work / "store" / "commitlog"), **SIZES,
        })
        broker = Broker(reactor, settings)
        call(broker.startService, timeout=60)
        call(lambda: broker.registered, timeout=60)
        yield AclCluster(namesrv, broker, home)
    finally:
        if broker is not None and broker.running:
            call(broker.stopService, timeout=60)
        call(namesrv.stopService, timeout=30)


@pytest.fixture(scope="module")
def java_peer(acl_cluster: AclCluster) -> Iterator[JavaPeer]:
    with JavaPeer(acl_cluster.namesrv_addr) as peer:
        yield peer


#: Generous client timeouts: a loaded machine (load 30 here) makes a cold JVM's first calls slow.
SLOW_MACHINE = ["--api-timeout-ms", "30000", "--send-timeout-ms", "30000"]


def keys(hook: AclClientRPCHook) -> list[str]:
    return ["--access-key", hook.access_key, "--secret-key", hook.secret_key, *SLOW_MACHINE]


def refused_send(java_peer: JavaPeer, topic: str, extra: list[str]) -> str:
    """What the Java producer reports when its send is refused (it must be refused)."""
    with pytest.raises(PeerError) as info:
        java_peer.produce(topic, 1, extra=extra, timeout=180)
    return str(info.value)


# ---- ACL ------------------------------------------------------------------------------------------


def test_java_client_with_the_right_secret_is_served(acl_cluster: AclCluster, java_peer: JavaPeer) -> None:
    acl_cluster.create_topic(USER_TOPIC)
    sent = java_peer.produce(USER_TOPIC, 6, body="acl-{i}", extra=keys(USER))
    assert [r.status for r in sent] == ["SEND_OK"] * 6
    got = java_peer.consume(USER_TOPIC, 6, group=unique("acl_cg"), timeout_ms=90_000, extra=keys(USER))
    assert sorted(r.body for r in got) == sorted(f"acl-{i}".encode() for i in range(6))
    assert acl_cluster.stored(USER_TOPIC) == 6


def test_wrong_secret_or_none_is_refused_and_stores_nothing(acl_cluster: AclCluster,
                                                            java_peer: JavaPeer) -> None:
    topic = unique(TOPIC_PREFIX + "_x")
    acl_cluster.create_topic(topic)
    wrong = refused_send(java_peer, topic, keys(AclClientRPCHook(USER.access_key, "not-the-user-secret")))
    assert "CODE: 16" in wrong and f"{ACL_EXCEPTION}: Check signature failed for accessKey={USER.access_key}" in wrong
    unsigned = refused_send(java_peer, topic, SLOW_MACHINE)
    assert "CODE: 16" in unsigned and f"{ACL_EXCEPTION}: No accessKey is configured" in unsigned
    unknown = refused_send(java_peer, topic, keys(AclClientRPCHook("rmqwire_nobody", USER.secret_key)))
    assert "CODE: 16" in unknown and "No acl config for rmqwire_nobody" in unknown
    assert acl_cluster.stored(topic) == 0
    # The same refusals on the wire, typed: NO_PERMISSION with the remark alone.
    with pytest.raises(NoPermissionError) as info:
        acl_cluster.signed(None, GetMaxOffset, topic=topic, queue_id=0)
    assert info.value.remark == f"{ACL_EXCEPTION}: No accessKey is configured"
    assert "user-secret-456" not in acl_cluster.broker.settings.all_configs_text()


def test_signed_but_not_permitted_is_refused(acl_cluster: AclCluster, java_peer: JavaPeer) -> None:
    acl_cluster.create_topic(DENIED_TOPIC)
    out = refused_send(java_peer, DENIED_TOPIC, keys(USER))   # the user may only SUB it
    assert f"{ACL_EXCEPTION}: No default permission for topic:{DENIED_TOPIC}" in out
    assert acl_cluster.stored(DENIED_TOPIC) == 0
    with pytest.raises(NoPermissionError) as info:
        acl_cluster.signed(USER, UpdateAndCreateTopic, topic=unique("acl_new"), default_topic="TBW102",
                           read_queue_nums=1, write_queue_nums=1, perm=6, topic_filter_type="SINGLE_TAG",
                           topic_sys_flag=0, order=False)
    assert info.value.remark == (f"{ACL_EXCEPTION}: Need admin permission for request code="
                                 f"{RequestCode.UPDATE_AND_CREATE_TOPIC}, but accessKey={USER.access_key} is not")


def test_mqadmin_with_acl_keys(acl_cluster: AclCluster, reference_unavailable: Any) -> None:
    topic = unique("acl_admin")
    ns = acl_cluster.namesrv_addr
    admin = (ADMIN.access_key, ADMIN.secret_key)
    created = run_mqadmin(ns, "updateTopic", "-b", acl_cluster.broker_addr, "-t", topic, "-r", "2", "-w", "2",
                          acl=admin)
    assert created.ok, created.stdout + created.stderr
    assert call(acl_cluster.broker.topic_config_manager.select, topic, timeout=10) is not None
    status = run_mqadmin(ns, "brokerStatus", "-b", acl_cluster.broker_addr, acl=admin)
    assert status.ok and "brokerVersionDesc" in status.stdout, status.stdout + status.stderr
    other = unique("acl_admin")
    refused = run_mqadmin(ns, "updateTopic", "-b", acl_cluster.broker_addr, "-t", other,
                          acl=(USER.access_key, USER.secret_key))
    assert not refused.ok and "Need admin permission" in refused.stdout + refused.stderr
    unsigned = run_mqadmin(ns, "brokerStatus", "-b", acl_cluster.broker_addr)
    assert not unsigned.ok and "No accessKey is configured" in unsigned.stdout + unsigned.stderr
    assert call(acl_cluster.broker.topic_config_manager.select, other, timeout=10) is None


def test_unsigned_config_update_is_refused_by_the_acl(acl_cluster: AclCluster) -> None:
    before = acl_cluster.broker.settings.all_configs_text()
    reply = wire.request(acl_cluster.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=CVE_33246_BODY)
    assert (reply.code, reply.remark) == (ResponseCode.NO_PERMISSION,
                                          f"{ACL_EXCEPTION}: No accessKey is configured")
    assert acl_cluster.broker.settings.all_configs_text() == before


# ---- CVE-2023-33246 / CVE-2023-37582 ----------------------------------------------------------------

#: The public CVE-2023-33246 proof of concept's body: a shell command as rocketmqHome, and a filter
#: server the broker would start with it.
CVE_33246_BODY = b"filterServerNums=1\nrocketmqHome=-c $@|sh . echo touch /tmp/rmqwire_cve_33246;\n"


def _broker_config(addr: str) -> dict[str, str]:
    reply = wire.request(addr, RequestCode.GET_BROKER_CONFIG)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return dict(line.split("=", 1) for line in (reply.body or b"").decode().splitlines() if "=" in line)


@pytest.mark.parametrize("enabled", [False, True], ids=["update-off", "update-on"])
def test_cve_2023_33246_update_broker_config_changes_nothing(tmp_path: Path, enabled: bool) -> None:
    marker = tmp_path / "pwned"
    props = {"enableUpdateBrokerConfig": str(enabled).lower()}
    (tmp_path / "broker").mkdir()
    with RmqwireBroker(None, props, workdir=tmp_path / "broker") as broker:
        conf_before = broker.config_file.read_bytes()
        effective = _broker_config(broker.addr)
        attempts = [
            (CVE_33246_BODY, "Can not update config in black list."),
            ("filterServerNums=1\nnamesrvAddr=127.0.0.1:1\n".encode(), None),
            (f"storePathRootDir={tmp_path / 'evil'}\n".encode(), None),
            (f"brokerConfigPath={marker}\n".encode(), "Can not update config in black list."),
            (f"storePathCommitLog={marker}\nbrokerPermission=6\n".encode(), None),
        ]
        for body, remark in attempts:
            reply = wire.request(broker.addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
            assert reply.code == ResponseCode.NO_PERMISSION, (body, reply.remark)
            assert reply.remark and (remark is None or reply.remark == remark), reply.remark
        assert broker.config_file.read_bytes() == conf_before
        assert _broker_config(broker.addr) == effective
        assert not marker.exists() and not (tmp_path / "evil").exists()
        allowed = wire.request(broker.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
        assert allowed.code == (ResponseCode.SUCCESS if enabled else ResponseCode.NO_PERMISSION)
        assert _broker_config(broker.addr)["brokerPermission"] == ("4" if enabled else "6")


def test_cve_2023_37582_update_namesrv_config_changes_nothing(tmp_path: Path) -> None:
    ensure_reactor()
    from twisted.internet import reactor

    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n"
                    "enableUpdateNamesrvConfig=true\n")
    conf_before = conf.read_bytes()
    namesrv = NameServer(reactor, NamesrvSettings.load(conf))
    call(namesrv.startService, timeout=30)
    try:
        addr = f"127.0.0.1:{namesrv.port}"
        evil = tmp_path / "evil"
        for body in (f"configStorePath={evil}\n", f"kvConfigPath={evil}\n",
                     f"configStorePath={evil}\nproductEnvName=x\n", f"rocketmqHome={evil}\n"):
            reply = wire.request(addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=body.encode())
            assert (reply.code, reply.remark) == (ResponseCode.NO_PERMISSION,
                                                  f"Can not update config in black list. ({body.split('=')[0]})"), \
                reply.remark
        # A KV write persists the KV file: still where it was configured, nothing at the exploit's path.
        put = wire.request(addr, RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"})
        assert put.code == ResponseCode.SUCCESS, put.remark
        assert (tmp_path / "kv.json").exists() and not evil.exists()
        assert conf.read_bytes() == conf_before
        got = wire.request(addr, RequestCode.GET_NAMESRV_CONFIG)
        assert f"kvConfigPath={tmp_path / 'kv.json'}" in (got.body or b"").decode()
    finally:
        call(namesrv.stopService, timeout=30)


