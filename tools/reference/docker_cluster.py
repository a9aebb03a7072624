"""Reference cluster in Docker containers, through testcontainers-python.

Same interface as ReferenceCluster (namesrv_addr, broker_addr, brokers, broker_name, cluster_name,
version, add_broker, stop, timings). The NameServer and each Broker run in their own container from
the image tools.reference.image provides: ``apache/rocketmq:<version>`` where a registry serves it,
else the same release's jars on a locally built Debian + JRE 17 image.

Every container uses the host's network stack (``network_mode="host"``) and binds 127.0.0.1 on
ports picked free like the JVM backend's, so the broker advertises an address that clients on the
host reach directly (no port mapping, no updateBrokerConfig afterwards) and the engine needs no
bridge. Readiness is the JVM backend's: the boot line, a TCP accept (NameServer), the broker
registered in GET_BROKER_CLUSTER_INFO and answering GET_BROKER_RUNTIME_INFO.

Containers are labelled with the owning process; stop() (also at exit) removes them, and start()
removes those whose owner died without stop(). The Ryuk reaper is disabled when its image cannot
be pulled or the engine has no bridge network for it.

On the locally built image each server runs with the JVM backend's command line (JDK 17 flags,
heaps, system properties). On the official image it runs through the image's own scripts
(``mqnamesrv``/``mqbroker``, JDK 8) with HEAP_OPTS.
"""

from __future__ import annotations

import atexit
import os
import shlex
import socket
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from tools.reference import jars
from tools.reference.cluster import (
    BROKER_BOOT,
    BROKER_HEAP,
    BROKER_MAIN,
    COMMON_JVM_FLAGS,
    LOOPBACK,
    NAMESRV_BOOT,
    NAMESRV_HEAP,
    NAMESRV_MAIN,
    START_TIMEOUT,
    BrokerInfo,
    ReferenceStartError,
    _runtime_info_ok,
    _tcp_accepts,
    pick_ports,
    pid_alive,
)
from tools.reference.image import RocketmqImage, ensure_image
from tools.reference.jars import ReferenceUnavailable
from tools.reference.wire import WireError, get_cluster_info

NO_DOCKER = "no Docker engine"
LABEL_ROLE = "org.rmqwire.reference"        # namesrv | broker
LABEL_OWNER = "org.rmqwire.owner-pid"       # the process that must remove the container
LABEL_HOST = "org.rmqwire.owner-host"       # pids only mean something on their own host
# The official image's scripts read HEAP_OPTS; its defaults would reserve ~4 GB per server.
OFFICIAL_HEAP_OPTS = "-Xms512m -Xmx512m -Xmn256m -XX:MaxDirectMemorySize=256m"
USER_HOME = "/home/rocketmq"


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
        return f"{NO_DOCKER} ({type(exc).__name__}: {str(exc)[:200]})"
    return None


# --------------------------------------------------------------------------- Ryuk

_ryuk_lock = threading.Lock()
_ryuk_verdict: list[str | None] = []   # once per process: why Ryuk is off (None: it is on)


def configure_ryuk() -> str | None:
    """Disable testcontainers' Ryuk reaper when it cannot run here; returns why, else None.

    Ryuk needs its image (pulled from a registry) and a bridge network for its port mapping. Without
    it, cleanup is ours: stop(), atexit, and the orphan sweep at the next start.
    """
    from testcontainers.core.config import testcontainers_config as tc

    from tools.reference.image import docker_client, has_image, try_pull

    with _ryuk_lock:
        if _ryuk_verdict:
            return _ryuk_verdict[0]
        if tc.ryuk_disabled:
            _ryuk_verdict.append("disabled by configuration (TESTCONTAINERS_RYUK_DISABLED)")
            return _ryuk_verdict[0]
        client = docker_client()
        try:
            bridge = any(n.name == "bridge" for n in client.networks.list())
            present = has_image(client, tc.ryuk_image)
        finally:
            client.close()
        why = None
        if not bridge:
            why = "the Docker engine has no bridge network (started with --bridge=none)"
        elif not present and (pulled := try_pull(tc.ryuk_image)) is not None:
            why = f"cannot pull {tc.ryuk_image}: {pulled}"
        if why:
            tc.ryuk_disabled = True
        _ryuk_verdict.append(why)
        return why


# --------------------------------------------------------------------------- containers

@dataclass(eq=False)
class ServerContainer:
    """One official server (NameServer or Broker) in its container."""

    name: str
    container: Any     # testcontainers DockerContainer

    def logs(self) -> str:
        try:
            out, err = self.container.get_logs()
        except Exception:   # removed already
            return ""
        return (out + err).decode(errors="replace")

    def alive(self) -> bool:
        try:
            wrapped = self.container.get_wrapped_container()
            wrapped.reload()
        except Exception:
            return False
        return wrapped.status in ("created", "running")

    def exit_code(self) -> int | None:
        try:
            return self.container.get_wrapped_container().attrs["State"]["ExitCode"]
        except Exception:
            return None

    def tail(self, lines: int = 30) -> str:
        return "\n".join([f"--- {self.name} container logs ---", *self.logs().splitlines()[-lines:]])

    def remove(self) -> None:
        try:
            self.container.stop()   # remove(force=True): the JVM gets SIGKILL; the store goes with it
        except Exception as exc:
            import docker.errors

            if not isinstance(exc, docker.errors.NotFound):
                raise


def _wait_for(cond: Any, timeout: float, server: ServerContainer, what: str, interval: float = 0.1) -> Any:
    """Poll ``cond()`` until truthy; fail early if the container exits, with its log tail."""
    deadline = time.monotonic() + timeout
    while True:
        result = cond()
        if result:
            return result
        if not server.alive():
            raise ReferenceStartError(f"{server.name} container exited ({server.exit_code()}) before {what}\n"
                                      f"{server.tail()}")
        if time.monotonic() > deadline:
            raise ReferenceStartError(f"{server.name}: no {what} within {timeout:.0f}s\n{server.tail()}")
        time.sleep(interval)


def _properties(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


_live: weakref.WeakSet[DockerReferenceCluster] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for cluster in list(_live):
        cluster.stop()


@dataclass(eq=False)   # identity hash: kept in a WeakSet for atexit
class DockerReferenceCluster:
    version: str = jars.DEFAULT_VERSION
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_conf: dict[str, str] = field(default_factory=dict)   # extra/overriding broker.conf keys
    start_timeout: float = START_TIMEOUT

    namesrv_addr: str = field(init=False, default="")
    image: RocketmqImage | None = field(init=False, default=None)
    ryuk: str = field(init=False, default="")   # why Ryuk is off, or "on"
    timings: dict[str, float] = field(init=False, default_factory=dict)
    _namesrv: ServerContainer | None = field(init=False, default=None)
    _brokers: list[tuple[BrokerInfo, ServerContainer]] = field(init=False, default_factory=list)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    lib_dir = None   # no local jars: everything runs inside the image

    @property
    def broker_addr(self) -> str:
        return self._brokers[0][0].addr

    @property
    def brokers(self) -> list[BrokerInfo]:
        return [info for info, _ in self._brokers]

    @property
    def containers(self) -> list[Any]:
        """The testcontainers DockerContainer objects, NameServer first."""
        servers = ([self._namesrv] if self._namesrv else []) + [s for _, s in self._brokers]
        return [s.container for s in servers]

    def log_tail(self, lines: int = 30) -> str:
        servers = ([self._namesrv] if self._namesrv else []) + [s for _, s in self._brokers]
        return "\n".join(s.tail(lines) for s in servers)

    def __enter__(self) -> DockerReferenceCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> DockerReferenceCluster:
        reason = docker_unavailable_reason()
        if reason:
            raise ReferenceUnavailable(reason)
        t0 = time.monotonic()
        self.image = ensure_image(self.version, log=lambda _msg: None)
        self.timings["image_s"] = time.monotonic() - t0
        self.ryuk = configure_ryuk() or "on"
        remove_orphans()
        _live.add(self)
        try:
            t1 = time.monotonic()
            self._start_namesrv()
            self.add_broker(self.broker_name)
            self.timings["containers_start_s"] = time.monotonic() - t1
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, role: str, name: str, conf_path: str, conf: str, main: str, heap: tuple[str, ...],
             logback: str) -> ServerContainer:
        from testcontainers.core.container import DockerContainer

        assert self.image is not None
        if self.image.official:
            # The image's entrypoint runs anything that is not nameserver/broker/controller as is;
            # its bin/ scripts read HEAP_OPTS and append JAVA_OPT_EXT.
            script = (f'mkdir -p "$(dirname {conf_path})" && printf %s "$RMQ_CONF" > {conf_path}'
                      f" && exec ./{'mqnamesrv' if role == 'namesrv' else 'mqbroker'} -c {conf_path}")
            env = {"HEAP_OPTS": OFFICIAL_HEAP_OPTS, "JAVA_OPT_EXT": "-Dtls.server.mode=disabled"}
        else:
            user_home = f"{USER_HOME}/{name}"
            java = ["java", *heap, *COMMON_JVM_FLAGS,
                    f"-Drocketmq.home.dir={self.image.rocketmq_home}", f"-Duser.home={user_home}",
                    # JNA extracts its native library here; it must be writable and executable.
                    f"-Djava.io.tmpdir={user_home}/tmp",
                    f"-Drmq.logback.configurationFile={logback}", "-Dtls.server.mode=disabled",
                    "-cp", f"{self.image.rocketmq_home}/lib/*", main, "-c", conf_path]
            script = (f'mkdir -p {user_home}/tmp "$(dirname {conf_path})" && printf %s "$RMQ_CONF" > {conf_path}'
                      f" && exec {shlex.join(java)}")
            env = {}
        container = (DockerContainer(self.image.tag)
                     .with_command(["sh", "-c", script])
                     .with_envs(RMQ_CONF=conf, **env)
                     .with_kwargs(network_mode="host",
                                  labels={LABEL_ROLE: role, LABEL_OWNER: str(os.getpid()),
                                          LABEL_HOST: socket.gethostname()}))
        server = ServerContainer(name, container)
        try:
            container.start()
        except BaseException:
            server.remove()
            raise
        return server

    def _start_namesrv(self) -> None:
        port = pick_ports((0,))
        conf = _properties({"listenPort": str(port), "bindAddress": LOOPBACK,
                            "kvConfigPath": f"{USER_HOME}/namesrv/namesrv/kvConfig.json"})
        t0 = time.monotonic()
        server = self._run("namesrv", "namesrv", f"{USER_HOME}/namesrv/namesrv.properties", conf,
                           NAMESRV_MAIN, NAMESRV_HEAP, "rmq.namesrv.logback.xml")
        self._namesrv = server
        _wait_for(lambda: NAMESRV_BOOT.search(server.logs()), self.start_timeout, server, "boot line")
        _wait_for(lambda: _tcp_accepts(LOOPBACK, port), self.start_timeout, server, "TCP accept")
        self.namesrv_addr = f"{LOOPBACK}:{port}"
        self.timings["namesrv_start_s"] = time.monotonic() - t0

    def add_broker(self, name: str, conf: dict[str, str] | None = None) -> BrokerInfo:
        """Start one more broker container in this cluster; returns once the NameServer lists it."""
        assert self.namesrv_addr, "not started"
        if any(info.name == name for info, _ in self._brokers):
            raise ValueError(f"broker {name!r} already runs in this cluster")
        last_error: ReferenceStartError | None = None
        for _attempt in range(3):
            try:
                return self._start_broker(name, {**self.broker_conf, **(conf or {})})
            except ReferenceStartError as exc:
                # Host networking: another process may have taken a probed port meanwhile.
                if "Address already in use" not in str(exc):
                    raise
                last_error = exc
        assert last_error is not None
        raise last_error

    def _start_broker(self, name: str, extra: dict[str, str]) -> BrokerInfo:
        listen = pick_ports((-2, 0, 1))
        store = f"{USER_HOME}/{name}/store"
        # The same broker.conf keys as the JVM backend (tools/reference/cluster.py), container paths.
        conf = _properties({
            "brokerClusterName": self.cluster_name,
            "brokerName": name,
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "namesrvAddr": self.namesrv_addr,
            "brokerIP1": LOOPBACK,
            "brokerIP2": LOOPBACK,
            "bindAddress": LOOPBACK,
            "listenPort": str(listen),
            "haListenPort": str(listen + 1),
            "storePathRootDir": store,
            "storePathCommitLog": f"{store}/commitlog",
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            "mappedFileSizeConsumeQueue": str(30_000 * 20),
            "mappedFileSizeTimerLog": str(16 * 1024 * 1024),
            "maxIndexNum": "16000",
            "maxHashSlotNum": "4000",
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "registerNameServerPeriod": "10000",
            "diskMaxUsedSpaceRatio": "95",
            # Java answers SYSTEM_BUSY to a send that waited 200 ms in the send queue; on a loaded
            # 2-core CI machine both brokers may, and the C++ client retries 5 times at once.
            "waitTimeMillsInSendQueue": "2000",
            **extra,
        })
        t0 = time.monotonic()
        # The conf must stay writable: updateBrokerConfig persists into it.
        server = self._run("broker", name, f"{USER_HOME}/{name}/broker.conf", conf, BROKER_MAIN, BROKER_HEAP,
                           "rmq.broker.logback.xml")
        addr = f"{LOOPBACK}:{listen}"
        info = BrokerInfo(name, addr, listen, store_dir=None)
        try:
            _wait_for(lambda: BROKER_BOOT.search(server.logs()), self.start_timeout, server, "boot line")
            _wait_for(lambda: self._registered(name, addr), self.start_timeout, server,
                      f"registration of {name} at {addr} in GET_BROKER_CLUSTER_INFO", interval=0.2)
            _wait_for(lambda: _runtime_info_ok(addr), self.start_timeout, server,
                      f"a successful GET_BROKER_RUNTIME_INFO from {name}", interval=0.2)
        except BaseException:
            server.remove()
            raise
        with self._lock:
            self._brokers.append((info, server))
        self.timings[f"broker_start_s:{name}"] = time.monotonic() - t0
        return info

    def _registered(self, name: str, addr: str) -> bool:
        try:
            info = get_cluster_info(self.namesrv_addr, timeout=3)
        except (OSError, WireError):
            return False
        return info.master_addr(name) == addr and name in info.clusters.get(self.cluster_name, ())

    def stop(self) -> None:
        """Remove every container of this cluster (brokers first); safe to call twice."""
        with self._lock:
            servers = [s for _, s in reversed(self._brokers)] + ([self._namesrv] if self._namesrv else [])
            self._brokers, self._namesrv = [], None
        try:
            errors = []
            for server in servers:
                try:
                    server.remove()
                except Exception as exc:   # keep removing the others
                    errors.append(f"{server.name}: {exc}")
            if errors:
                raise ReferenceStartError("could not remove containers: " + "; ".join(errors))
        finally:
            _live.discard(self)


# --------------------------------------------------------------------------- leftovers

@dataclass(frozen=True, slots=True)
class LeftoverContainer:
    id: str
    name: str
    role: str
    owner_pid: int


def our_containers(client: Any) -> list[LeftoverContainer]:
    """Containers of ours (any state) started on this host."""
    found = []
    for c in client.containers.list(all=True, filters={"label": [LABEL_OWNER, f"{LABEL_HOST}={socket.gethostname()}"]}):
        try:
            owner = int(c.labels.get(LABEL_OWNER, ""))
        except ValueError:
            owner = -1
        found.append(LeftoverContainer(c.id, c.name, c.labels.get(LABEL_ROLE, "?"), owner))
    return found


def remove_orphans() -> list[LeftoverContainer]:
    """Remove containers of ours whose owner process is gone (it died without stop())."""
    from tools.reference.image import docker_client

    client = docker_client()
    try:
        orphans = [c for c in our_containers(client) if not pid_alive(c.owner_pid)]
        for c in orphans:
            try:
                client.containers.get(c.id).remove(force=True, v=True)
            except Exception:   # removed meanwhile
                pass
        return orphans
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.reference.docker_cluster leftovers``: remove and list containers of ours
    whose owner is gone; exit 1 if there were any (scripts/test.sh runs it after the tests)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args != ["leftovers"]:
        print("usage: python -m tools.reference.docker_cluster leftovers", file=sys.stderr)
        return 2
    if docker_unavailable_reason():
        return 0
    orphans = remove_orphans()
    for c in orphans:
        print(f"container left running by pid {c.owner_pid}: {c.name} ({c.role}, {c.id[:12]}); removed",
              file=sys.stderr)
    return 1 if orphans else 0


if __name__ == "__main__":
    raise SystemExit(main())
