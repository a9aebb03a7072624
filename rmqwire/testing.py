"""pytest plugin: an in-process NameServer + Broker for your tests (no JVM, no container).

Installed with the package (entry point ``pytest11``: ``rmqwire = "rmqwire.testing"``), it
provides the fixture ``rmqwire_cluster``: a NameServer and a Broker started in this process on free
loopback ports with a temporary store, torn down (store closed cleanly, ports released) after the
test::

    from rmqwire import Message, Producer

    def test_send(rmqwire_cluster):
        with Producer("test_group", namesrv_addr=rmqwire_cluster.namesrv_addr) as p:
            assert p.send(Message("TopicTest", b"hello")).status.name == "SEND_OK"

Topics are created on first send (from TBW102), as with a default broker; ``create_topic`` makes one
with a given number of queues. The servers run on the reactor of rmqwire's blocking API (crochet's
thread), so the blocking clients and this fixture share it. Nothing is imported until the fixture
is used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["RmqwireCluster", "rmqwire_cluster", "start_cluster"]

#: Seconds to start or stop the servers.
TIMEOUT = 60.0


@dataclasses.dataclass
class RmqwireCluster:
    """What ``rmqwire_cluster`` yields."""

    namesrv_addr: str
    broker_addr: str
    store_dir: Path
    broker_name: str
    cluster_name: str
    standalone: Any = dataclasses.field(repr=False)

    def create_topic(self, topic: str, queues: int = 4, *, order: bool = False) -> None:
        """Create (or update) ``topic`` with ``queues`` read and write queues; returns once the
        NameServer serves its route."""
        from rmqwire.client.blocking import call
        from rmqwire.codec.commands.topic import TopicConfig

        broker = self.standalone.broker
        cfg = TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues,
                          perm=6, order=order)

        def create() -> Any:
            broker.topic_config_manager.update(cfg)
            return broker.register_incremental([cfg])

        call(create, timeout=TIMEOUT)

    def stop(self) -> None:
        from rmqwire.client.blocking import call

        if self.standalone.running:
            call(self.standalone.stopService, timeout=TIMEOUT)


def start_cluster(store_dir: str | Path, *, namesrv_properties: dict[str, str] | None = None,
                  **broker_properties: str) -> RmqwireCluster:
    """Start a NameServer + Broker in this process (free loopback ports, store in ``store_dir``).
    ``broker_properties`` are broker.conf keys (e.g. ``flushDiskType="SYNC_FLUSH"``),
    ``namesrv_properties`` namesrv.conf keys."""
    from rmqwire.client.blocking import call, ensure_reactor
    from rmqwire.server.standalone import Standalone, StandaloneOptions

    reactor = ensure_reactor()
    options = StandaloneOptions(namesrv_port=0, broker_port=0, store_dir=Path(store_dir),
                                broker_properties=dict(broker_properties),
                                namesrv_properties=dict(namesrv_properties or {}))
    standalone = call(Standalone, reactor, options, timeout=TIMEOUT)
    call(standalone.startService, timeout=TIMEOUT)
    try:
        call(standalone.when_registered, timeout=TIMEOUT)
    except BaseException:
        call(standalone.stopService, timeout=TIMEOUT)
        raise
    b = standalone.broker
    return RmqwireCluster(
        namesrv_addr=standalone.namesrv_addr,
        broker_addr=standalone.broker_addr,
        store_dir=standalone.store_dir,
        broker_name=b.settings.broker.broker_name,
        cluster_name=b.settings.broker.broker_cluster_name,
        standalone=standalone,
    )


@pytest.fixture
def rmqwire_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqwireCluster]:
    """A NameServer + Broker in this process, on free loopback ports, with a temporary store."""
    cluster = start_cluster(tmp_path_factory.mktemp("rmqwire") / "store")
    try:
        yield cluster
    finally:
        cluster.stop()
