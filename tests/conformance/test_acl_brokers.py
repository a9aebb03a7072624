"""rmqwire's ACL hook (AclClientRPCHook) against official brokers with ACL on.

- 4.9.7 with plain ACL (``aclEnable=true`` + plain_acl.yml). The global white list is empty, so
  every request from 127.0.0.1 goes through the signature check (wire-format.md section 11.3). A
  refusal is the broker's RPC hook throwing AclException before any processor runs, which the 4.x
  remoting layer answers as 1 SYSTEM_ERROR with remark ``AclException.toString()`` + ", " + the
  top stack frame.
- 5.3.3 with ACL 2.0 authentication (``authenticationEnabled``, local user store): a refusal is
  16 NO_PERMISSION with the AuthenticationException message as remark.

Every request is a typed call of rmqwire's RemotingClient whose RemotingConfig carries the hook,
so signing happens where it will in production: right before the request is written.

trial TestCases run under pytest (trial drives the real reactor and fails a test that leaves
sockets or delayed calls behind). Each class shares one cluster, injected by a class-scoped fixture,
so the 4.x cluster is gone before the 5.x one starts (two cores, four JVMs otherwise).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from polling import wait_until
from twisted.internet import defer
from twisted.trial import unittest

from rmqwire.codec import (
    Message,
    PullMessageRequestHeader,
    PullSysFlag,
    RemotingCommand,
    ResponseCode,
    SendMessageRequestHeaderV2,
    UniqueIdGenerator,
    decode_messages,
    encode_properties,
)
from rmqwire.codec.acl import ACCESS_KEY, SIGNATURE, UNIQUE_KEY_QUERY
from rmqwire.codec.commands import (
    CreateTopicRequestHeader,
    GetBrokerRuntimeInfo,
    GetMaxOffset,
    GetMaxOffsetRequestHeader,
    PullMessage,
    QueryMessage,
    QueryMessageRequestHeader,
    SendMessageV2,
    UpdateAndCreateTopic,
)
from rmqwire.errors import (
    BrokerResponseError,
    BrokerSystemError,
    NoPermissionError,
    QueryNotFoundError,
)
from rmqwire.remoting import AclClientRPCHook, RemotingClient, RemotingConfig
from tools.reference import jars
from tools.reference.jars import ReferenceUnavailable

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

TIMEOUT = 15.0
IDS = UniqueIdGenerator()

TOPIC = "rmqwire_acl_topic"
OTHER_TOPIC = "rmqwire_acl_other"   # the 4.x user account has no permission on it
GROUP = "rmqwire_acl_group"

# 4.x plain ACL accounts.
ADMIN = AclClientRPCHook("rmqwire_admin", "admin-secret-123")
USER = AclClientRPCHook("rmqwire_user", "user-secret-456")
# 5.x ACL 2.0: the initial SUPER user (authorization stays off, so it may do everything).
SUPER = AclClientRPCHook("rmqwire_super", "super-secret-789")

# What the 4.x remoting layer answers when the ACL hook throws (NettyRemotingAbstract: SYSTEM_ERROR,
# RemotingHelper.exceptionSimpleDesc).
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "


@dataclasses.dataclass(frozen=True)
class ChangeAfterSigning:
    """An RPC hook placed after the signer: it changes a signed field on the way out."""

    key: str
    value: str

    def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return dataclasses.replace(request, ext_fields={**(request.ext_fields or {}), self.key: self.value})

    def after_response(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
        return None


@dataclasses.dataclass(frozen=True)
class Recorder:
    """An RPC hook placed last: keeps the extFields of every request as it is written."""

    sent: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def before_request(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        self.sent.append(dict(request.ext_fields or {}))
        return request

    def after_response(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
        return None


def _start(cluster: Any, reference_unavailable: Any) -> Any:
    try:
        cluster.start()
    except ReferenceUnavailable as exc:
        reference_unavailable(str(exc))
    return cluster


@pytest.fixture(scope="class")
def plain_acl_cluster(reference_unavailable: Any) -> Iterator[Any]:
    """A private 4.9.7 NameServer + Broker with plain ACL; stopped however the tests end."""
    from tools.reference.cluster import AclAccount, PlainAcl, ReferenceCluster

    acl = PlainAcl(
        accounts=(
            AclAccount(ADMIN.access_key, ADMIN.secret_key, admin=True,
                       default_topic_perm="PUB|SUB", default_group_perm="PUB|SUB"),
            AclAccount(USER.access_key, USER.secret_key, admin=False,
                       default_topic_perm="DENY", default_group_perm="SUB",
                       topic_perms=(f"{TOPIC}=PUB|SUB",)),
        ),
        # Empty on purpose: a white-listed 127.0.0.1 would skip the signature check.
        global_white_remote_addresses=(),
    )
    cluster = ReferenceCluster(version=jars.REFERENCE_4X, plain_acl=acl)
    try:
        yield _start(cluster, reference_unavailable)
    finally:
        cluster.stop()


@pytest.fixture(scope="class")
def auth_v2_cluster(reference_unavailable: Any) -> Iterator[Any]:
    """A private 5.3.3 NameServer + Broker with ACL 2.0 authentication; stopped however the tests end."""
    from tools.reference.cluster import Authentication, ReferenceCluster

    cluster = ReferenceCluster(version="5.3.3",
                               authentication=Authentication(SUPER.access_key, SUPER.secret_key))
    try:
        yield _start(cluster, reference_unavailable)
    finally:
        cluster.stop()


class _AclTestCase(unittest.TestCase):
    """Helpers: typed calls to the cluster's broker from RemotingClients whose config signs."""

    timeout = 120
    cluster: Any
    #: signs topic creation (an admin / super user)
    admin: AclClientRPCHook
    #: signs sends, pulls and queries
    user: AclClientRPCHook

    def setUp(self) -> None:
        from twisted.internet import (
            reactor,  # tests own the reactor; library code never does
        )

        self.reactor: Any = reactor
        self.as_admin = self.client(self.admin)
        self.as_user = self.client(self.user)
        self.unsigned = self.client()

    def client(self, *hooks: Any, **config: Any) -> RemotingClient:
        """A RemotingClient that runs ``hooks`` on every request (none: unsigned requests)."""
        client = RemotingClient(self.reactor, RemotingConfig(rpc_hooks=hooks, **config))
        self.addCleanup(client.close)
        return client

    def call(self, client: RemotingClient, command: Any, header: Any = None,
             body: Any = None) -> defer.Deferred[Any]:
        return client.call(self.cluster.broker_addr, command, header, body=body, timeout=TIMEOUT)

    @defer.inlineCallbacks
    def refusal(self, d: defer.Deferred[Any]) -> Any:
        """The typed error ``d`` fails with (the test fails if the call succeeds)."""
        err = yield self.assertFailure(d, BrokerResponseError)
        return err

    def wait_until(self, probe: Any, what: str, timeout: float = 30.0) -> Any:
        return wait_until(self.reactor, probe, what, timeout)

    @staticmethod
    def topic_header(topic: str) -> CreateTopicRequestHeader:
        return CreateTopicRequestHeader(
            topic=topic, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4,
            perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False,
        )

    def ensure_topic(self, topic: str) -> defer.Deferred[Any]:
        return self.call(self.as_admin, UpdateAndCreateTopic, self.topic_header(topic))

    @staticmethod
    def message(topic: str = TOPIC) -> Message:
        msg = Message.create(topic, f"acl body {uuid.uuid4().hex}".encode(), tags="TagA")
        msg.unique_key = IDS.next_id()
        return msg

    def send(self, client: RemotingClient, msg: Message, queue_id: int) -> defer.Deferred[Any]:
        header = SendMessageRequestHeaderV2(
            a="rmqwire_acl_pg", b=msg.topic, c="TBW102", d=4, e=queue_id, f=0,
            g=int(time.time() * 1000), h=msg.flag, i=encode_properties(msg.properties), j=0,
            k=False, m=False,
        )
        return self.call(client, SendMessageV2, header, msg.body)

    def max_offset(self, client: RemotingClient, queue_id: int) -> defer.Deferred[Any]:
        return self.call(client, GetMaxOffset, GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=queue_id))

    @staticmethod
    def unique_key_query(msg: Message) -> QueryMessageRequestHeader:
        return QueryMessageRequestHeader(
            topic=msg.topic, key=msg.unique_key, max_num=32, begin_timestamp=0,
            end_timestamp=int(time.time() * 1000) + 3_600_000,
            extra={UNIQUE_KEY_QUERY: "true"},
        )

    @defer.inlineCallbacks
    def query_until_found(self, client: RemotingClient, msg: Message) -> Any:
        """QUERY_MESSAGE by unique key until the broker's (asynchronous) index has the message."""
        @defer.inlineCallbacks
        def found() -> Any:
            try:
                resp = yield self.call(client, QueryMessage, self.unique_key_query(msg))
            except QueryNotFoundError:
                return None
            return resp

        resp = yield self.wait_until(found, f"QUERY_MESSAGE by unique key {msg.unique_key}")
        (got,) = decode_messages(resp.body)
        self.assertEqual((got.unique_key, got.body), (msg.unique_key, msg.body))

    @defer.inlineCallbacks
    def check_signed_send_max_offset_pull(self) -> Any:
        """(a) signed SEND_MESSAGE_V2, GET_MAX_OFFSET and PULL_MESSAGE all succeed."""
        yield self.ensure_topic(TOPIC)
        msg = self.message()
        sent = (yield self.send(self.as_user, msg, queue_id=0)).header

        @defer.inlineCallbacks
        def dispatched() -> Any:
            resp = yield self.max_offset(self.as_user, 0)
            return resp.header.offset > sent.queue_offset

        yield self.wait_until(dispatched, "GET_MAX_OFFSET to count the sent message")
        pull = PullMessageRequestHeader(
            consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=sent.queue_offset,
            max_msg_nums=1, sys_flag=int(PullSysFlag.SUBSCRIPTION), commit_offset=0,
            suspend_timeout_millis=0, subscription="*", sub_version=0, expression_type="TAG",
        )
        resp = yield self.call(self.as_user, PullMessage, pull)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        (got,) = decode_messages(resp.body)
        self.assertEqual((got.body, got.unique_key), (msg.body, msg.unique_key))

    @defer.inlineCallbacks
    def check_refused_send_stores_nothing(self, bad: RemotingClient, queue_id: int) -> Any:
        """A refused send is refused before any processor: the next good send to the same (unused)
        queue still gets queue offset 0. Returns the refusal."""
        yield self.ensure_topic(TOPIC)
        err = yield self.refusal(self.send(bad, self.message(), queue_id=queue_id))
        resp = yield self.send(self.as_user, self.message(), queue_id=queue_id)
        self.assertEqual(resp.header.queue_offset, 0)
        return err


class PlainAcl4xTests(_AclTestCase):
    """4.9.7, aclEnable=true, plain_acl.yml."""

    admin = ADMIN
    user = USER

    @pytest.fixture(autouse=True)
    def _inject_cluster(self, plain_acl_cluster: Any) -> None:
        self.cluster = plain_acl_cluster

    def assert_refused(self, err: BrokerResponseError, message: str) -> None:
        self.assertIsInstance(err, BrokerSystemError)
        self.assertEqual(err.code, ResponseCode.SYSTEM_ERROR)
        self.assertTrue(err.remark.startswith(ACL_EXCEPTION + message), err.remark)

    # (a)
    def test_signed_requests_are_accepted(self) -> Any:
        return self.check_signed_send_max_offset_pull()

    # (b)
    @defer.inlineCallbacks
    def test_wrong_secret_is_refused(self) -> Any:
        wrong = self.client(AclClientRPCHook(USER.access_key, "not-the-user-secret"))
        err = yield self.check_refused_send_stores_nothing(wrong, queue_id=1)
        self.assert_refused(err, f"Check signature failed for accessKey={USER.access_key}")
        err = yield self.refusal(self.max_offset(wrong, 1))
        self.assert_refused(err, f"Check signature failed for accessKey={USER.access_key}")

    @defer.inlineCallbacks
    def test_tampered_or_unknown_signer_is_refused(self) -> Any:
        # A signed field changed after signing: the content no longer matches the signature.
        tampered = self.client(USER, ChangeAfterSigning("queueId", "1"))
        err = yield self.refusal(self.max_offset(tampered, 0))
        self.assert_refused(err, f"Check signature failed for accessKey={USER.access_key}")
        # An access key the broker does not know.
        unknown = self.client(AclClientRPCHook("rmqwire_nobody", USER.secret_key))
        err = yield self.refusal(self.max_offset(unknown, 0))
        self.assert_refused(err, "No acl config for rmqwire_nobody")

    # (c)
    @defer.inlineCallbacks
    def test_unsigned_requests_are_refused(self) -> Any:
        err = yield self.check_refused_send_stores_nothing(self.unsigned, queue_id=2)
        self.assert_refused(err, "No accessKey is configured")
        err = yield self.refusal(self.max_offset(self.unsigned, 2))
        self.assert_refused(err, "No accessKey is configured")
        # A request without any extFields is refused the same way.
        err = yield self.refusal(self.call(self.unsigned, GetBrokerRuntimeInfo))
        self.assert_refused(err, "No accessKey is configured")

    @defer.inlineCallbacks
    def test_signed_but_not_permitted_is_refused(self) -> Any:
        # The signature is good; then the account's permissions are checked.
        yield self.ensure_topic(OTHER_TOPIC)
        err = yield self.refusal(self.send(self.as_user, self.message(OTHER_TOPIC), queue_id=0))
        self.assert_refused(err, f"No default permission for topic:{OTHER_TOPIC}")
        err = yield self.refusal(self.call(self.as_user, UpdateAndCreateTopic,
                                           self.topic_header(OTHER_TOPIC)))
        self.assert_refused(err, f"Need admin permission for request code={UpdateAndCreateTopic.code}, "
                                 f"but accessKey={USER.access_key} is not")

    # (d)
    @defer.inlineCallbacks
    def test_unique_key_query_needs_broker_4x(self) -> Any:
        yield self.ensure_topic(TOPIC)
        msg = self.message()
        yield self.send(self.as_user, msg, queue_id=3)
        # A 4.x broker drops _UNIQUE_KEY_QUERY from the content it verifies, so a signature over
        # it (broker_4x=False, as the Java 4.9.4+ client signs) is refused...
        err = yield self.refusal(self.call(self.as_user, QueryMessage, self.unique_key_query(msg)))
        self.assert_refused(err, f"Check signature failed for accessKey={USER.access_key}")
        # ...while broker_4x=True still sends the key but leaves it out of the signed content.
        wire = Recorder()
        yield self.query_until_found(self.client(dataclasses.replace(USER, broker_4x=True), wire), msg)
        sent = wire.sent[-1]
        self.assertEqual((sent[UNIQUE_KEY_QUERY], sent[ACCESS_KEY]), ("true", USER.access_key))
        self.assertIn(SIGNATURE, sent)


class AuthV2Tests(_AclTestCase):
    """5.3.3, ACL 2.0 authentication (authorization off)."""

    admin = SUPER
    user = SUPER

    @pytest.fixture(autouse=True)
    def _inject_cluster(self, auth_v2_cluster: Any) -> None:
        self.cluster = auth_v2_cluster

    def assert_refused(self, err: BrokerResponseError, remark: str) -> None:
        self.assertIsInstance(err, NoPermissionError)
        self.assertEqual((err.code, err.remark), (ResponseCode.NO_PERMISSION, remark))

    def test_signed_requests_are_accepted(self) -> Any:
        return self.check_signed_send_max_offset_pull()

    @defer.inlineCallbacks
    def test_wrong_secret_is_refused(self) -> Any:
        wrong = self.client(AclClientRPCHook(SUPER.access_key, "not-the-super-secret"))
        err = yield self.check_refused_send_stores_nothing(wrong, queue_id=1)
        self.assert_refused(err, "check signature failed.")
        unknown = self.client(AclClientRPCHook("rmqwire_nobody", SUPER.secret_key))
        err = yield self.refusal(self.max_offset(unknown, 1))
        self.assert_refused(err, "User:rmqwire_nobody is not found.")

    @defer.inlineCallbacks
    def test_unsigned_requests_are_refused(self) -> Any:
        err = yield self.check_refused_send_stores_nothing(self.unsigned, queue_id=2)
        self.assert_refused(err, "username cannot be null.")
        err = yield self.refusal(self.call(self.unsigned, GetBrokerRuntimeInfo))
        self.assert_refused(err, "username cannot be null.")

    @defer.inlineCallbacks
    def test_unique_key_query_is_signed_unless_v4_9_3_or_older(self) -> Any:
        yield self.ensure_topic(TOPIC)
        msg = self.message()
        yield self.send(self.as_user, msg, queue_id=3)
        # A 5.x broker keeps _UNIQUE_KEY_QUERY in the verified content for requests newer than
        # V4_9_3, so here broker_4x=True is the wrong choice...
        super_4x = dataclasses.replace(SUPER, broker_4x=True)
        err = yield self.refusal(self.call(self.client(super_4x), QueryMessage, self.unique_key_query(msg)))
        self.assert_refused(err, "check signature failed.")
        # ...and the default signature is accepted.
        yield self.query_until_found(self.as_user, msg)
        # A request claiming V4_9_3 (399) gets the key stripped, as a 4.x broker does.
        yield self.query_until_found(self.client(super_4x, version=399), msg)
