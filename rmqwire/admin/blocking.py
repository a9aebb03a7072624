"""``Admin``: the blocking Admin API (Java's ``DefaultMQAdminExt``) over ``AdminCore``.

    with Admin(namesrv_addr="127.0.0.1:9876") as admin:
        info = admin.examine_broker_cluster_info()
        stats = admin.examine_topic_stats("TopicTest")

Each method runs the core's method in the reactor thread (crochet) and waits for its typed result,
or raises its typed error. ``timeout`` bounds every request; ``wait`` bounds a whole operation
(which may take several requests: consume stats ask every broker of a route).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from rmqwire.admin.core import DEFAULT_TIMEOUT, AdminCore
from rmqwire.client.blocking import call, delegate, ensure_reactor
from rmqwire.remoting.config import RemotingConfig
from rmqwire.remoting.hooks import AclClientRPCHook

#: Java's ``MixAll.NAMESRV_ADDR_ENV``.
NAMESRV_ADDR_ENV = "NAMESRV_ADDR"


def remoting_config(
    *,
    timeout: float = DEFAULT_TIMEOUT,
    access_key: str | None = None,
    secret_key: str | None = None,
    tls: Any = None,
) -> RemotingConfig:
    """The remoting options of an admin client: ACL signing with the keys, TLS when ``tls`` is
    True (any server certificate, as Java's default test mode) or a Twisted connection creator."""
    if bool(access_key) != bool(secret_key):
        raise ValueError("access key and secret key go together")
    hooks = (AclClientRPCHook(access_key, secret_key or ""),) if access_key else ()
    if tls is True:
        from twisted.internet.ssl import CertificateOptions

        tls = CertificateOptions(verify=False)
    return RemotingConfig(call_timeout=timeout, rpc_hooks=hooks, tls=tls or None)


class Admin:
    """Blocking admin client; ``namesrv_addr`` is ``"host:port;host:port"`` (default: the
    NAMESRV_ADDR environment variable)."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: Any = None,
        timeout: float = DEFAULT_TIMEOUT,
        wait: float = 120.0,
        config: RemotingConfig | None = None,
    ) -> None:
        addr = namesrv_addr if namesrv_addr is not None else os.environ.get(NAMESRV_ADDR_ENV)
        self.timeout = wait
        self.request_timeout = timeout
        cfg = config or remoting_config(timeout=timeout, access_key=access_key,
                                        secret_key=secret_key, tls=tls)
        reactor = ensure_reactor()
        self._core: AdminCore = call(
            lambda: AdminCore(reactor, addr or "", config=cfg, timeout=timeout), timeout=wait
        )
        self._started = False

    @property
    def core(self) -> AdminCore:
        """The Twisted core (use it only from the reactor thread)."""
        return self._core

    def start(self) -> Admin:
        if not self._started:
            call(self._core.startService, timeout=self.timeout)
            self._started = True
        return self

    def shutdown(self) -> None:
        if self._started:
            self._started = False
            call(self._core.stopService, timeout=self.timeout)

    def __enter__(self) -> Admin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def name_server_address_list(self) -> list[str]:
        return self._core.name_server_address_list

    # NameServer: routes, clusters, topics, KV config, permissions, config
    examine_broker_cluster_info = delegate("examine_broker_cluster_info")
    examine_topic_route_info = delegate("examine_topic_route_info")
    fetch_all_topic_list = delegate("fetch_all_topic_list")
    fetch_topics_by_cluster = delegate("fetch_topics_by_cluster")
    get_topic_cluster_list = delegate("get_topic_cluster_list")
    create_and_update_kv_config = delegate("create_and_update_kv_config")
    delete_kv_config = delegate("delete_kv_config")
    get_kv_config = delegate("get_kv_config")
    wipe_write_perm_of_broker = delegate("wipe_write_perm_of_broker")
    add_write_perm_of_broker = delegate("add_write_perm_of_broker")
    get_name_server_config = delegate("get_name_server_config")
    update_name_server_config = delegate("update_name_server_config")
    create_or_update_order_conf = delegate("create_or_update_order_conf")
    # brokers
    fetch_broker_runtime_stats = delegate("fetch_broker_runtime_stats")
    get_broker_config = delegate("get_broker_config")
    update_broker_config = delegate("update_broker_config")
    view_broker_stats_data = delegate("view_broker_stats_data")
    fetch_consume_stats_in_broker = delegate("fetch_consume_stats_in_broker")
    get_all_producer_info = delegate("get_all_producer_info")
    clean_expired_consumer_queue = delegate("clean_expired_consumer_queue")
    delete_expired_commit_log = delegate("delete_expired_commit_log")
    clean_unused_topic = delegate("clean_unused_topic")
    # topics
    create_and_update_topic_config = delegate("create_and_update_topic_config")
    examine_topic_config = delegate("examine_topic_config")
    examine_topic_stats = delegate("examine_topic_stats")
    delete_topic = delegate("delete_topic")
    delete_topic_in_broker = delegate("delete_topic_in_broker")
    delete_topic_in_name_server = delegate("delete_topic_in_name_server")
    fetch_subscribe_message_queues = delegate("fetch_subscribe_message_queues")
    # subscription groups, consumers, producers
    create_and_update_subscription_group_config = delegate(
        "create_and_update_subscription_group_config"
    )
    examine_subscription_group_config = delegate("examine_subscription_group_config")
    get_all_subscription_group = delegate("get_all_subscription_group")
    delete_subscription_group = delegate("delete_subscription_group")
    examine_consume_stats = delegate("examine_consume_stats")
    examine_consume_stats_on = delegate("examine_consume_stats_on")
    examine_consumer_connection_info = delegate("examine_consumer_connection_info")
    examine_producer_connection_info = delegate("examine_producer_connection_info")
    query_topic_consume_by_who = delegate("query_topic_consume_by_who")
    get_consumer_running_info = delegate("get_consumer_running_info")
    consume_message_directly = delegate("consume_message_directly")
    clone_group_offset = delegate("clone_group_offset")
    # offsets
    reset_offset_by_timestamp = delegate("reset_offset_by_timestamp")
    reset_offset_by_timestamp_old = delegate("reset_offset_by_timestamp_old")
    reset_offset_by_queue_id = delegate("reset_offset_by_queue_id")
    update_consume_offset = delegate("update_consume_offset")
    min_offset = delegate("min_offset")
    max_offset = delegate("max_offset")
    search_offset = delegate("search_offset")
    search_offset_on = delegate("search_offset_on")
    # messages
    view_message = delegate("view_message")
    query_message = delegate("query_message")
    query_message_by_uniq_key = delegate("query_message_by_uniq_key")
    pull = delegate("pull")
    pull_queues = delegate("pull_queues")
    query_consume_queue = delegate("query_consume_queue")
    message_track_detail = delegate("message_track_detail")
