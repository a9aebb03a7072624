"""The broker's 4.x plain ACL without sockets: plain_acl.yml parsing, IP allow-lists, the
resources each request code needs, signature and permission checks as PlainPermissionManager
makes them, and the broker's dispatcher answering NO_PERMISSION before any processor runs."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from rmqwire.codec import LanguageCode, RemotingCommand, ResponseCode, encode_properties
from rmqwire.codec.acl import UNIQUE_KEY_QUERY
from rmqwire.codec.commands import QueryMessage
from rmqwire.codec.commands.admin import GetBrokerRuntimeInfo, UpdateBrokerConfig
from rmqwire.codec.commands.heartbeat import (
    ConsumerData,
    HeartBeat,
    HeartbeatData,
    build_subscription_data,
)
from rmqwire.codec.commands.pull import PullMessage
from rmqwire.codec.commands.send import SendMessageRequestHeader, SendMessageV2
from rmqwire.codec.commands.topic import UpdateAndCreateTopic
from rmqwire.remoting.dispatcher import RequestContext
from rmqwire.remoting.hooks import AclClientRPCHook
from rmqwire.server.acl import (
    ACL_EXCEPTION,
    AclError,
    PlainAccessValidator,
)
from rmqwire.server.acl.permission import DENY, PUB, SUB, check_permission, parse_perm
from rmqwire.server.acl.plain import parse_request
from rmqwire.server.acl.remote_address import address_matcher
from rmqwire.server.broker import Broker, BrokerSettings

PEER = "127.0.0.1:50000"
ADMIN = AclClientRPCHook("rmqwire_admin", "admin-secret-123")
USER = AclClientRPCHook("rmqwire_user", "user-secret-456")

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: rmqwire_admin
    secretKey: admin-secret-123
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: rmqwire_user
    secretKey: user-secret-456
    whiteRemoteAddress: 192.168.0.{1,2}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=PUB|SUB
      - topicB=SUB
      - topicC=DENY
    groupPerms:
      - groupX=DENY
"""


def validator(tmp_path: Path, text: str = PLAIN_ACL) -> PlainAccessValidator:
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "plain_acl.yml").write_text(text)
    return PlainAccessValidator.for_home(tmp_path)


def send(topic: str, group: str = "pg") -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
        sys_flag=0, born_timestamp=1_700_000_000_000, flag=0, properties=encode_properties({"WAIT": "true"}),
        reconsume_times=0, unit_mode=False, batch=False)
    return SendMessageV2.request(header.to_v2(), b"body", language=LanguageCode.JAVA)


def pull(topic: str, group: str) -> RemotingCommand:
    return PullMessage.request(
        consumer_group=group, topic=topic, queue_id=0, queue_offset=0, max_msg_nums=1, sys_flag=2,
        commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0, expression_type="TAG")


def refusal(v: PlainAccessValidator, request: RemotingCommand, peer: str = PEER) -> str:
    with pytest.raises(AclError) as info:
        v.validate(request, peer)
    return str(info.value)


# ---- permissions and addresses ----------------------------------------------------------------------


def test_permission_words_and_checks_follow_java() -> None:
    assert [parse_perm(w) for w in ("PUB", "SUB", "PUB|SUB", " SUB|PUB ", "DENY", "ALL", None)] == [
        PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY, DENY]
    assert check_permission(PUB, PUB | SUB) and not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY | SUB)   # an owned DENY bit refuses everything
    assert check_permission(2, SUB) and not check_permission(2, DENY)   # ANY


@pytest.mark.parametrize(("pattern", "yes", "no"), [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["127.0.0.1"]),
    ("192.168.1.{1,2}", ["192.168.1.2"], ["192.168.1.3"]),
    ("10.0.0.1,10.0.0.9", ["10.0.0.9"], ["10.0.0.2"]),
    ("10.10.103.*", ["10.10.103.0", "10.10.103.255"], ["10.10.104.1"]),
    ("10.10.*.*", ["10.10.7.9"], ["10.11.7.9"]),
    ("10.10.1-5.*", ["10.10.5.200"], ["10.10.6.1"]),
    ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.21"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("0:0:0:0:0:0:0:1", ["::1"], ["::2"]),
])
def test_white_remote_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    match = address_matcher(pattern)
    assert all(match(a) for a in yes) and not any(match(a) for a in no)


@pytest.mark.parametrize("pattern", ["not-an-ip", "10.10.300.*", "10.*", "1.2.3.5-2", "1.2.3.{1,x}"])
def test_malformed_address_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(AclError):
        address_matcher(pattern)


# ---- the file ---------------------------------------------------------------------------------------


def test_plain_acl_yml_is_read_in_the_official_shape(tmp_path: Path) -> None:
    v = validator(tmp_path)
    admin, user = v.config.accounts["rmqwire_admin"], v.config.accounts["rmqwire_user"]
    assert admin.admin and not user.admin
    assert (admin.default_topic_perm, user.default_topic_perm, user.default_group_perm) == (PUB | SUB, DENY, SUB)
    assert user.resource_perms == {"topicA": PUB | SUB, "topicB": SUB, "topicC": DENY, "%RETRY%groupX": DENY}
    assert v.config.global_white_remote_addresses == ("10.10.103.*",)
    assert "user-secret-456" not in repr(v.config)


def test_conf_acl_dir_adds_accounts_and_the_first_definition_wins(tmp_path: Path) -> None:
    (tmp_path / "conf" / "acl").mkdir(parents=True)
    (tmp_path / "conf" / "acl" / "more.yaml").write_text(
        "accounts:\n  - {accessKey: rmqwire_extra, secretKey: extra-secret-1}\n"
        "  - {accessKey: rmqwire_user, secretKey: other-secret-9}\n")
    v = validator(tmp_path)
    assert set(v.config.accounts) == {"rmqwire_admin", "rmqwire_user", "rmqwire_extra"}
    assert v.config.accounts["rmqwire_user"].secret_key == "other-secret-9"   # conf/acl is read first


def test_bad_files_are_refused_with_a_reason_and_no_secret(tmp_path: Path) -> None:
    with pytest.raises(AclError, match="length should longer than 6") as info:
        validator(tmp_path, "accounts:\n  - {accessKey: rmqwire_short, secretKey: sh0rt}\n")
    assert "sh0rt" not in str(info.value)
    with pytest.raises(AclError, match="Parse resource permission failed for topic:oops"):
        validator(tmp_path, "accounts:\n  - {accessKey: rmqwire_x1, secretKey: long-secret, topicPerms: [oops]}\n")
    with pytest.raises(AclError, match="cannot read ACL file"):
        validator(tmp_path, "accounts: [\n")
    with pytest.raises(AclError, match="rocketmqHome"):
        PlainAccessValidator.for_home(None)


def test_changed_files_are_reloaded_and_broken_ones_keep_the_old_accounts(tmp_path: Path) -> None:
    v = validator(tmp_path)
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    acl_file.write_text("accounts:\n  - {accessKey: rmqwire_new1, secretKey: new-secret-1}\n")
    future = time.time() + 5
    os.utime(acl_file, (future, future))
    assert v.reload_if_changed() and set(v.config.accounts) == {"rmqwire_new1"}
    acl_file.write_text("accounts: [\n")
    os.utime(acl_file, (future + 5, future + 5))
    assert not v.reload_if_changed() and set(v.config.accounts) == {"rmqwire_new1"}
    assert not v.reload_if_changed()


# ---- requests ---------------------------------------------------------------------------------------


def test_resources_needed_per_request_code() -> None:
    assert parse_request(send("topicA"), PEER).resources == {"topicA": PUB}
    assert parse_request(send("%RETRY%cg", group="cg"), PEER).resources == {"%RETRY%cg": SUB}
    assert parse_request(pull("topicA", "cg"), PEER).resources == {"topicA": SUB, "%RETRY%cg": SUB}
    hb = HeartbeatData(client_id="c1", consumer_data_set=[
        ConsumerData(group_name="cg", subscription_data_set=[build_subscription_data("topicB", "*")])])
    assert parse_request(HeartBeat.request(body=hb), PEER).resources == {"%RETRY%cg": SUB, "topicB": SUB}
    assert parse_request(GetBrokerRuntimeInfo.request(), "[::1]:9").remote_address == "::1"


def test_signatures_accounts_and_permissions(tmp_path: Path) -> None:
    v = validator(tmp_path)
    v.validate(USER.before_request(PEER, send("topicA")), PEER)
    v.validate(ADMIN.before_request(PEER, send("anything")), PEER)
    assert refusal(v, send("topicA")) == "No accessKey is configured"
    assert refusal(v, GetBrokerRuntimeInfo.request()) == "No accessKey is configured"
    wrong = AclClientRPCHook(USER.access_key, "not-the-secret")
    assert refusal(v, wrong.before_request(PEER, send("topicA"))) == "Check signature failed for accessKey=rmqwire_user"
    unknown = AclClientRPCHook("rmqwire_nobody", USER.secret_key)
    assert refusal(v, unknown.before_request(PEER, send("topicA"))) == "No acl config for rmqwire_nobody"
    assert refusal(v, USER.before_request(PEER, send("topicB"))) == "No default permission for topic:topicB"
    assert refusal(v, USER.before_request(PEER, send("other"))) == "No default permission for topic:other"
    assert refusal(v, USER.before_request(PEER, pull("topicA", "groupX"))) == "No default permission for group:groupX"
    v.validate(USER.before_request(PEER, pull("topicB", "cg")), PEER)
    create = UpdateAndCreateTopic.request(topic="t", default_topic="TBW102", read_queue_nums=1,
                                          write_queue_nums=1, perm=6, topic_filter_type="SINGLE_TAG",
                                          topic_sys_flag=0, order=False)
    assert refusal(v, USER.before_request(PEER, create)) == (
        "Need admin permission for request code=17, but accessKey=rmqwire_user is not")
    v.validate(ADMIN.before_request(PEER, create), PEER)
    v.validate(USER.before_request(PEER, send("RMQ_SYS_TRACE_TOPIC")), PEER)   # traces pass


def test_white_listed_addresses_skip_the_checks(tmp_path: Path) -> None:
    v = validator(tmp_path)
    v.validate(send("topicC"), "10.10.103.7:1234")                                # global: no key at all
    plain = send("topicC")
    keyed = dataclasses.replace(plain, ext_fields={**(plain.ext_fields or {}), "AccessKey": USER.access_key})
    v.validate(keyed, "192.168.0.2:1234")                                         # the account's own list
    assert refusal(v, keyed, "192.168.0.3:1234") == "Check signature failed for accessKey=rmqwire_user"


def test_unique_key_query_is_verified_as_a_5x_broker_does(tmp_path: Path) -> None:
    v = validator(tmp_path)
    query = QueryMessage.request(topic="topicA", key="k", max_num=1, begin_timestamp=0, end_timestamp=1,
                                 extra={UNIQUE_KEY_QUERY: "true"})
    v.validate(ADMIN.before_request(PEER, query), PEER)                      # signed over the key
    signer_4x = dataclasses.replace(ADMIN, broker_4x=True)
    assert refusal(v, signer_4x.before_request(PEER, query)).startswith("Check signature failed")
    old = dataclasses.replace(query, version=399)                            # V4_9_3 and older: left out
    v.validate(signer_4x.before_request(PEER, old), PEER)


# ---- in the broker ----------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    (tmp_path / "home" / "conf").mkdir(parents=True)
    (tmp_path / "home" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    settings = BrokerSettings.from_properties({
        "brokerName": "broker-acl", "brokerIP1": "127.0.0.1", "listenPort": "10911", "aclEnable": "true",
        "rocketmqHome": str(tmp_path / "home"), "storePathRootDir": str(tmp_path / "store"),
        "mappedFileSizeCommitLog": str(1 << 20), "mappedFileSizeConsumeQueue": str(1000 * 20),
    })
    b = Broker(Clock(), settings)
    b.store.load()
    b.topic_config_manager.load()
    b.store.start()
    try:
        yield b
    finally:
        b.store.shutdown()


def answer(broker: Broker, request: RemotingCommand, *, fast: bool = False) -> RemotingCommand:
    server = broker.fast_server if fast else broker.server
    assert server is not None
    d: Deferred[Any] = server.dispatcher.dispatch(request.with_opaque(3), RequestContext(peer=PEER))
    out: list[Any] = []
    d.addBoth(out.append)
    (r,) = out
    return r


def test_the_broker_refuses_before_any_processor(broker: Broker) -> None:
    r = answer(broker, send("topicA"))
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, f"{ACL_EXCEPTION}: No accessKey is configured")
    r = answer(broker, AclClientRPCHook(USER.access_key, "wrong-secret-1").before_request(PEER, send("topicA")),
               fast=True)
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION,
                                  f"{ACL_EXCEPTION}: Check signature failed for accessKey=rmqwire_user")
    r = answer(broker, USER.before_request(PEER, UpdateBrokerConfig.request(body=b"brokerPermission=4\n")))
    assert r.code == ResponseCode.NO_PERMISSION and "Need admin permission for request code=25" in r.remark
    assert broker.settings.broker.broker_permission == 6
    r = answer(broker, ADMIN.before_request(PEER, GetBrokerRuntimeInfo.request()))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert broker.topic_config_manager.select("topicA") is None   # the refused send created nothing


def test_acl_off_by_default_and_on_needs_a_home(tmp_path: Path) -> None:
    base = {"brokerName": "b", "brokerIP1": "127.0.0.1", "storePathRootDir": str(tmp_path / "s")}
    assert Broker(Clock(), BrokerSettings.from_properties(base)).acl is None
    with pytest.raises(AclError, match="rocketmqHome"):
        Broker(Clock(), BrokerSettings.from_properties({**base, "aclEnable": "true", "rocketmqHome": ""}))


def test_secrets_are_not_logged(tmp_path: Path, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    v = validator(tmp_path)
    refusal(v, AclClientRPCHook(USER.access_key, "not-the-secret").before_request(PEER, send("topicA")))
    assert "user-secret-456" not in caplog.text and "not-the-secret" not in caplog.text
