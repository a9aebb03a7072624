"""Reference cluster from the official image ``apache/rocketmq:<version>`` via testcontainers.

Same interface as ReferenceCluster (namesrv_addr, broker_addr, broker_name, cluster_name, version,
add_broker, stop). One container runs NameServer and Broker. The broker inside the container
advertises the container's own address, which clients on the host cannot reach through mapped
ports, so after boot three ``updateBrokerConfig`` calls set brokerIP1 to the host address and
listenPort to the mapped port; the last one (brokerPermission) makes the broker re-register at once.
Note: the image runs JDK 8 and the official scripts, so this backend is not byte-identical to the
JVM backend's JDK 17 command line.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from tools.reference import jars
from tools.reference.cluster import BrokerInfo, ReferenceStartError
from tools.reference.jars import ReferenceUnavailable
from tools.reference.wire import WireError, get_cluster_info

NO_DOCKER = "no Docker engine"
IMAGE = "apache/rocketmq"
NAMESRV_PORT = 9876
BROKER_PORT = 10911
# Both processes read HEAP_OPTS; the image defaults would reserve ~4 GB.
HEAP_OPTS = "-Xms512m -Xmx512m -Xmn256m -XX:MaxDirectMemorySize=256m"
BOOT_TIMEOUT = 120.0


def docker_unavailable_reason() -> str | None:
    """None if a Docker engine answers ping, else a reason starting with 'no Docker engine'."""
    try:
        import docker
    except ImportError:
        return f"{NO_DOCKER} (python docker SDK not installed)"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:   # the SDK raises DockerException, requests errors, FileNotFoundError...
        return f"{NO_DOCKER} ({type(exc).__name__})"
    return None


def _broker_conf(cluster: str, name: str, namesrv: str) -> str:
    return "\n".join([
        f"brokerClusterName={cluster}", f"brokerName={name}", "brokerId=0", "brokerRole=ASYNC_MASTER",
        "flushDiskType=ASYNC_FLUSH", f"namesrvAddr={namesrv}", "autoCreateTopicEnable=true",
        "autoCreateSubscriptionGroup=true", "mappedFileSizeCommitLog=67108864",
        "mappedFileSizeConsumeQueue=600000", "maxIndexNum=16000", "maxHashSlotNum=4000",
        "diskMaxUsedSpaceRatio=95", "registerNameServerPeriod=10000",
    ]) + "\n"


@dataclass(eq=False)
class DockerReferenceCluster:
    version: str = jars.DEFAULT_VERSION
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    boot_timeout: float = BOOT_TIMEOUT

    namesrv_addr: str = field(init=False, default="")
    timings: dict[str, float] = field(init=False, default_factory=dict)
    _containers: list[Any] = field(init=False, default_factory=list)
    _brokers: list[BrokerInfo] = field(init=False, default_factory=list)
    _host: str = field(init=False, default="127.0.0.1")
    _namesrv_internal: str = field(init=False, default="")

    lib_dir = None   # no local jars: everything runs inside the image

    @property
    def image(self) -> str:
        return f"{IMAGE}:{self.version}"

    @property
    def broker_addr(self) -> str:
        return self._brokers[0].addr

    @property
    def brokers(self) -> list[BrokerInfo]:
        return list(self._brokers)

    def __enter__(self) -> DockerReferenceCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> DockerReferenceCluster:
        reason = docker_unavailable_reason()
        if reason:
            raise ReferenceUnavailable(reason)
        try:
            t0 = time.monotonic()
            script = (f"printf %s {shlex.quote(_broker_conf(self.cluster_name, self.broker_name, 'localhost:9876'))}"
                      " > /tmp/broker.conf && (./mqnamesrv &) && exec ./mqbroker -n localhost:9876 -c /tmp/broker.conf")
            container = self._run(script, NAMESRV_PORT, BROKER_PORT)
            self._host = _loopback(container.get_container_host_ip())
            self.namesrv_addr = f"{self._host}:{container.get_exposed_port(NAMESRV_PORT)}"
            client = container.get_docker_client()
            self._namesrv_internal = f"{client.bridge_ip(container.get_container_id())}:{NAMESRV_PORT}"
            self._brokers.append(self._advertise(container, self.broker_name))
            self.timings["container_start_s"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def add_broker(self, name: str) -> BrokerInfo:
        """A second broker in its own container, registered with the first container's NameServer."""
        script = (f"printf %s {shlex.quote(_broker_conf(self.cluster_name, name, self._namesrv_internal))}"
                  f" > /tmp/broker.conf && exec ./mqbroker -n {self._namesrv_internal} -c /tmp/broker.conf")
        container = self._run(script, BROKER_PORT)
        info = self._advertise(container, name)
        self._brokers.append(info)
        return info

    def _run(self, script: str, *ports: int) -> Any:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.waiting_utils import wait_for_logs

        container = (DockerContainer(self.image).with_exposed_ports(*ports)
                     .with_env("HEAP_OPTS", HEAP_OPTS).with_command(["sh", "-c", script]))
        container.start()
        self._containers.append(container)
        # "boot success" alone would match the NameServer's line first.
        wait_for_logs(container, r"The broker\[.*boot success", timeout=self.boot_timeout)
        return container

    def _advertise(self, container: Any, name: str) -> BrokerInfo:
        mapped = int(container.get_exposed_port(BROKER_PORT))
        for key, value in (("brokerIP1", self._host), ("listenPort", str(mapped)), ("brokerPermission", "6")):
            code, output = container.exec(["sh", "./mqadmin", "updateBrokerConfig", "-b", f"localhost:{BROKER_PORT}",
                                           "-n", "localhost:9876" if name == self.broker_name
                                           else self._namesrv_internal, "-k", key, "-v", value])
            if code != 0 or b"Exception" in (output or b""):
                raise ReferenceStartError(f"updateBrokerConfig {key}={value} failed: {output!r}")
        addr = f"{self._host}:{mapped}"
        deadline = time.monotonic() + self.boot_timeout
        while time.monotonic() < deadline:
            try:
                if get_cluster_info(self.namesrv_addr, timeout=3).master_addr(name) == addr:
                    return BrokerInfo(name, addr, mapped, store_dir=None)
            except (OSError, WireError):
                pass
            time.sleep(0.5)
        raise ReferenceStartError(f"broker {name} not advertised as {addr} within {self.boot_timeout}s")

    def stop(self) -> None:
        containers, self._containers = self._containers, []
        self._brokers = []
        for c in reversed(containers):
            try:
                c.stop()
            except Exception:   # already gone; the Ryuk reaper removes leftovers anyway
                pass


def _loopback(host: str) -> str:
    return "127.0.0.1" if host in ("localhost", "::1") else host
