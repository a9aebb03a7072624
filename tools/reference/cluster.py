"""The official Apache RocketMQ NameServer and Broker(s) as separate JVM processes on loopback.

Each JVM runs the release's own main class (NamesrvStartup / BrokerStartup) with a ``-c`` config file,
as the official scripts do, but with small heaps, ports picked free on 127.0.0.1 and everything
(home, logs, store) under one temp directory that stop() removes.

Orphan JVMs are prevented three ways: stop() (context manager and atexit), a process group per JVM
so a SIGKILL reaches the whole group, and PR_SET_PDEATHSIG so the kernel terminates a JVM whose
parent died without running atexit (e.g. SIGKILL of pytest).
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from rmqwire.codec import RemotingCommand, RequestCode, ResponseCode, sign_command
from tools.reference import jars
from tools.reference.wire import WireError, get_cluster_info, request

START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0
LOOPBACK = "127.0.0.1"

# Module flags the store and remoting code need on JDK 17 (DirectBuffer casts, cleaner reflection).
JDK17_FLAGS = (
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
)
COMMON_JVM_FLAGS = ("-XX:+UseG1GC", "-XX:MaxMetaspaceSize=256m", "-XX:-OmitStackTraceInFastThrow", *JDK17_FLAGS)
NAMESRV_HEAP = ("-Xms256m", "-Xmx256m")
# No AlwaysPreTouch: it would commit the whole heap at start on a shared 2-core machine.
BROKER_HEAP = ("-Xms512m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m")

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"

NAMESRV_BOOT = re.compile(r"The Name Server boot success")
BROKER_BOOT = re.compile(r"The broker\[(?P<name>[^,\]]+), (?P<addr>[^\]]+)\] boot success")

# Ports below the kernel's ephemeral range, so outgoing connections cannot grab them meanwhile.
_PORT_RANGE = (20000, 32000)
_reserved_ports: set[int] = set()
_reserved_lock = threading.Lock()


class ReferenceStartError(RuntimeError):
    """An official JVM was available but did not come up (the message carries its log tail)."""


# --------------------------------------------------------------------------- ports

def _port_free(port: int) -> bool:
    # 0.0.0.0 also conflicts with a 127.0.0.1 listener, and the broker's HA port binds 0.0.0.0.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def pick_ports(offsets: tuple[int, ...] = (0,)) -> int:
    """A base port P such that P+o is free for every offset o (reserved for this process)."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(_PORT_RANGE[0] + 2, _PORT_RANGE[1] - 2)
        wanted = {base + o for o in offsets}
        with _reserved_lock:
            if wanted & _reserved_ports:
                continue
            if all(_port_free(p) for p in wanted):
                _reserved_ports.update(wanted)
                return base
    raise ReferenceStartError(f"no free ports (offsets {offsets}) in {_PORT_RANGE}")


# --------------------------------------------------------------------------- processes

def pdeathsig() -> None:
    # Runs in the child before exec: ask the kernel to SIGTERM it when the parent thread dies.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class JvmProcess:
    """One official JVM: its Popen, combined stdout/stderr file and RocketMQ log directory."""

    name: str
    popen: subprocess.Popen[bytes]
    stdout_path: Path
    log_dir: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stdout_text(self) -> str:
        try:
            return self.stdout_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 30) -> str:
        parts = [f"--- {self.name} stdout/stderr ({self.stdout_path}) ---",
                 *self.stdout_text().splitlines()[-lines:]]
        for log in sorted(self.log_dir.glob("*.log")) if self.log_dir.exists() else ():
            if log.name.startswith(("namesrv", "broker")) and log.stat().st_size:
                parts.append(f"--- {log.name} ---")
                parts.extend(log.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(parts)

    def terminate(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (the JVM's shutdown hooks unregister and flush), SIGKILL the group after timeout."""
        self.send_term()
        self.reap(time.monotonic() + timeout)

    def send_term(self) -> None:
        if self.popen.poll() is None:
            killpg(self.popen.pid, signal.SIGTERM)

    def reap(self, deadline: float) -> None:
        try:
            self.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def java_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NAMESRV_ADDR", "ROCKETMQ_HOME", "JAVA_OPT", "JAVA_OPT_EXT", "JAVA_TOOL_OPTIONS")}
    env["ROCKETMQ_HOME"] = str(home)
    env["JAVA_HOME"] = str(jars.java_home())
    return env


def jvm_command(version: str, main: str, heap: tuple[str, ...], home: Path, user_home: Path,
                logback: str, args: list[str], tls_server_mode: str = "disabled") -> list[str]:
    """The java command line for one official main class (shared with mqadmin)."""
    (user_home / "tmp").mkdir(parents=True, exist_ok=True)
    return [
        jars.java_bin(), *heap, *COMMON_JVM_FLAGS,
        f"-Drocketmq.home.dir={home}",
        f"-Duser.home={user_home}",
        # JNA extracts its native library here; it must be writable and executable.
        f"-Djava.io.tmpdir={user_home / 'tmp'}",
        # 5.x picks its logback config by resource name; 4.x reads ROCKETMQ_HOME/conf (write_v4_logback).
        f"-Drmq.logback.configurationFile={logback}",
        # 'permissive' and 'enforcing' take TLS with a self-signed certificate made at start (and
        # 'permissive' plain TCP too); plain TCP is all most tests use.
        f"-Dtls.server.mode={tls_server_mode}",
        "-cp", jars.classpath(version),
        main, *args,
    ]


def spawn(name: str, cmd: list[str], home: Path, user_home: Path, cwd: Path) -> JvmProcess:
    stdout_path = cwd / f"{name}.out"
    with open(stdout_path, "wb") as out:
        popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=cwd, env=java_env(home), start_new_session=True,
                                 preexec_fn=pdeathsig)
    return JvmProcess(name, popen, stdout_path, user_home / "logs" / "rocketmqlogs")


@dataclass(frozen=True, slots=True)
class OneShotResult:
    returncode: int
    stdout: bytes
    stderr: bytes       # empty when merged into stdout
    elapsed_s: float
    stopped: bool       # still running after ``timeout``: we stopped it


def run_to_end(cmd: list[str], *, cwd: Path, env: dict[str, str] | None, timeout: float,
               term_grace: float | None = None, merge_stderr: bool = False) -> OneShotResult:
    """Run a one-shot official tool (mqadmin, benchmark) and collect its output.

    After ``timeout`` it is stopped: SIGTERM then SIGKILL after ``term_grace`` seconds, or SIGKILL
    at once when ``term_grace`` is None. However the caller leaves (pytest-timeout, Ctrl-C), the
    process group is killed, so no JVM outlives the call.
    """
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                            cwd=cwd, env=env, start_new_session=True, preexec_fn=pdeathsig)
    stopped = False
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stopped = True
            if term_grace is not None:
                killpg(proc.pid, signal.SIGTERM)
                try:
                    out, err = proc.communicate(timeout=term_grace)
                except subprocess.TimeoutExpired:
                    killpg(proc.pid, signal.SIGKILL)
                    out, err = proc.communicate()
            else:
                killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return OneShotResult(proc.returncode, out or b"", err or b"", time.monotonic() - t0, stopped)


_V4_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<!-- rmqwire test harness: 4.x servers require ROCKETMQ_HOME/conf/{name}; log to a file only. -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${{user.home}}/logs/rocketmqlogs/{log}.log</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level %logger{{20}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def write_v4_logback(home: Path) -> None:
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for name, log in (("logback_namesrv.xml", "namesrv"), ("logback_broker.xml", "broker"),
                      ("logback_tools.xml", "tools")):
        (conf / name).write_text(_V4_LOGBACK.format(name=name, log=log))


# --------------------------------------------------------------------------- ACL 1.0 (4.x plain ACL)

# 4.x PlainPermissionManager refuses keys of 6 characters or fewer (AclConstants *_MIN_LENGTH).
_ACL_KEY_MIN_LENGTH = 7
_ACL_PERMS = frozenset({"DENY", "PUB", "SUB", "PUB|SUB", "SUB|PUB"})


@dataclass(frozen=True, slots=True)
class AclAccount:
    """One ``accounts`` entry of a 4.x ``plain_acl.yml``.

    ``topic_perms`` / ``group_perms`` are ``name=PERM`` strings (PERM: DENY, PUB, SUB, PUB|SUB).
    ``white_remote_address`` None means none: every request of this account is signature-checked.
    """

    access_key: str
    secret_key: str = field(repr=False)
    admin: bool = False
    default_topic_perm: str = "DENY"
    default_group_perm: str = "SUB"
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()
    white_remote_address: str | None = None

    def __post_init__(self) -> None:
        for what, key in (("access_key", self.access_key), ("secret_key", self.secret_key)):
            if len(key) < _ACL_KEY_MIN_LENGTH:
                raise ValueError(f"{what} must have at least {_ACL_KEY_MIN_LENGTH} characters "
                                 "(a 4.x broker drops shorter keys)")
        perms = [self.default_topic_perm, self.default_group_perm,
                 *(p.partition("=")[2] for p in self.topic_perms + self.group_perms)]
        bad = [p for p in perms if p not in _ACL_PERMS]
        if bad:
            raise ValueError(f"unknown ACL permission(s) {bad}; use one of {sorted(_ACL_PERMS)}")


@dataclass(frozen=True, slots=True)
class PlainAcl:
    """The content of ``ROCKETMQ_HOME/conf/plain_acl.yml`` for a 4.x broker started with ``aclEnable``.

    A request from an address matching ``global_white_remote_addresses`` skips every check, so to
    exercise signatures keep 127.0.0.1 out of it. The readiness probe signs with ``probe_account``.
    """

    accounts: tuple[AclAccount, ...]
    global_white_remote_addresses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.accounts:
            raise ValueError("plain ACL needs at least one account (the readiness probe signs with it)")

    @property
    def probe_account(self) -> AclAccount:
        """The account the launcher's own requests sign with: the first admin, else the first."""
        return next((a for a in self.accounts if a.admin), self.accounts[0])

    def to_yaml(self) -> str:
        # Every scalar is written double-quoted (JSON string syntax is valid YAML), so that e.g. a
        # numeric secret stays a string and '*' or '|' need no thought.
        q = json.dumps
        lines = ["# rmqwire test harness: plain ACL of a 4.x broker (aclEnable=true)",
                 "globalWhiteRemoteAddresses:" + ("" if self.global_white_remote_addresses else " []")]
        lines += [f"  - {q(a)}" for a in self.global_white_remote_addresses]
        lines.append("accounts:")
        for acc in self.accounts:
            lines += [f"  - accessKey: {q(acc.access_key)}",
                      f"    secretKey: {q(acc.secret_key)}",
                      f"    whiteRemoteAddress: {q(acc.white_remote_address or '')}",
                      f"    admin: {'true' if acc.admin else 'false'}",
                      f"    defaultTopicPerm: {q(acc.default_topic_perm)}",
                      f"    defaultGroupPerm: {q(acc.default_group_perm)}"]
            for key, perms in (("topicPerms", acc.topic_perms), ("groupPerms", acc.group_perms)):
                lines.append(f"    {key}:" + ("" if perms else " []"))
                lines += [f"      - {q(p)}" for p in perms]
        return "\n".join(lines) + "\n"


def write_plain_acl(home: Path, acl: PlainAcl) -> None:
    """conf/plain_acl.yml where 4.x PlainPermissionManager reads it (ROCKETMQ_HOME/conf)."""
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "plain_acl.yml").write_text(acl.to_yaml())


# --------------------------------------------------------------------------- ACL 2.0 (5.x authentication)

@dataclass(frozen=True, slots=True)
class Authentication:
    """5.x ACL 2.0 authentication (``authenticationEnabled``) with the broker's local user store.

    ``username`` / ``password`` become the initial SUPER user (``initAuthenticationUser``); a
    request signs with them as AccessKey / SecretKey, and so does the readiness probe.
    Authorization stays off, so that user may do everything.
    """

    username: str
    password: str = field(repr=False)

    def broker_conf(self) -> dict[str, str]:
        provider = "org.apache.rocketmq.auth.authentication.provider."
        return {
            "authenticationEnabled": "true",
            "authenticationProvider": provider + "DefaultAuthenticationProvider",
            "authenticationMetadataProvider": provider + "LocalAuthenticationMetadataProvider",
            "initAuthenticationUser": json.dumps({"username": self.username, "password": self.password}),
        }


def _runtime_info_ok(broker_addr: str, credentials: tuple[str, str] | None = None) -> bool:
    ext: dict[str, str] | None = None
    if credentials is not None:
        signed = sign_command(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), *credentials)
        ext = dict(signed.ext_fields or {})
    try:
        reply = request(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO, ext, timeout=3)
    except (OSError, WireError):
        return False
    return reply.code == ResponseCode.SUCCESS


def _wait_for(cond, timeout: float, proc: JvmProcess, what: str, interval: float = 0.1):
    """Poll ``cond()`` until truthy; fail early if the JVM exits, with its log tail."""
    deadline = time.monotonic() + timeout
    while True:
        result = cond()
        if result:
            return result
        if not proc.alive():
            raise ReferenceStartError(f"{proc.name} exited with {proc.popen.returncode} before {what}\n"
                                      f"{proc.tail()}")
        if time.monotonic() > deadline:
            raise ReferenceStartError(f"{proc.name}: no {what} within {timeout:.0f}s\n{proc.tail()}")
        time.sleep(interval)


# --------------------------------------------------------------------------- cluster

@dataclass(frozen=True, slots=True)
class BrokerInfo:
    name: str
    addr: str          # brokerIP1:listenPort, as registered with the NameServer
    listen_port: int   # fast port is listen_port - 2, HA port listen_port + 1
    store_dir: Path | None   # None for the docker backend


@dataclass
class _Broker:
    info: BrokerInfo
    proc: JvmProcess


_live: weakref.WeakSet[ReferenceCluster] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for cluster in list(_live):
        cluster.stop()


@dataclass(eq=False)   # identity hash: kept in a WeakSet for atexit
class ReferenceCluster:
    """Official NameServer + Broker on loopback. ``with ReferenceCluster() as c:`` or start()/stop()."""

    version: str = jars.DEFAULT_VERSION
    workdir: Path | str | None = None
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_conf: dict[str, str] = field(default_factory=dict)   # extra/overriding broker.conf keys
    start_timeout: float = START_TIMEOUT
    # 4.x only: every broker starts with aclEnable=true and this conf/plain_acl.yml.
    plain_acl: PlainAcl | None = None
    # 5.x only: every broker starts with ACL 2.0 authentication on.
    authentication: Authentication | None = None
    # Java's tls.server.mode for the brokers; when not "disabled" the NameServer is "permissive"
    # (TLS clients and the harness's plain probes alike).
    broker_tls_mode: str = "disabled"

    namesrv_addr: str = field(init=False, default="")
    timings: dict[str, float] = field(init=False, default_factory=dict)
    _root: Path | None = field(init=False, default=None)
    _store_root: Path | None = field(init=False, default=None)
    _namesrv: JvmProcess | None = field(init=False, default=None)
    _brokers: list[_Broker] = field(init=False, default_factory=list)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    # -- public view -------------------------------------------------------

    @property
    def lib_dir(self) -> Path:
        return jars.lib_dir(self.version)

    @property
    def home(self) -> Path:
        assert self._root is not None, "cluster not started"
        return self._root / "home"

    @property
    def broker_addr(self) -> str:
        return self._brokers[0].info.addr

    @property
    def brokers(self) -> list[BrokerInfo]:
        return [b.info for b in self._brokers]

    @property
    def pids(self) -> list[int]:
        procs = ([self._namesrv] if self._namesrv else []) + [b.proc for b in self._brokers]
        return [p.pid for p in procs]

    def log_tail(self, lines: int = 30) -> str:
        procs = ([self._namesrv] if self._namesrv else []) + [b.proc for b in self._brokers]
        return "\n".join(p.tail(lines) for p in procs)

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> ReferenceCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ReferenceCluster:
        if self.plain_acl is not None and not jars.is_v4(self.version):
            raise ValueError(f"plain_acl is the 4.x ACL (aclEnable); RocketMQ {self.version} is not 4.x")
        if self.authentication is not None and jars.is_v4(self.version):
            raise ValueError(f"authentication is ACL 2.0 (5.3+); RocketMQ {self.version} is 4.x")
        jars.ensure_jars(self.version)   # ReferenceUnavailable before anything is created
        jars.java_bin()
        _live.add(self)
        try:
            self._prepare_dirs()
            self._start_namesrv()
            self.add_broker(self.broker_name)
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare_dirs(self) -> None:
        parent = Path(self.workdir) if self.workdir else None
        if parent:
            parent.mkdir(parents=True, exist_ok=True)
        _sweep_orphans(parent or Path(tempfile.gettempdir()), "rmqwire-ref-")
        self._root = Path(tempfile.mkdtemp(prefix="rmqwire-ref-", dir=parent))
        _claim(self._root)
        (self._root / "home").mkdir()
        if jars.is_v4(self.version):
            write_v4_logback(self._root / "home")
        if self.plain_acl is not None:
            write_plain_acl(self._root / "home", self.plain_acl)
        # The broker refuses every send above ~90% disk use; a nearly full disk gets a tmpfs store.
        usage = shutil.disk_usage(self._root)
        if usage.used / usage.total > 0.85 and Path("/dev/shm").is_dir():
            _sweep_orphans(Path("/dev/shm"), "rmqwire-store-")
            self._store_root = Path(tempfile.mkdtemp(prefix="rmqwire-store-", dir="/dev/shm"))
            _claim(self._store_root)
        else:
            self._store_root = self._root / "store"

    def _start_namesrv(self) -> None:
        assert self._root is not None
        port = pick_ports((0,))
        user_home = self._root / "namesrv"
        conf = self._root / "namesrv.properties"
        conf.write_text(_properties({
            "listenPort": str(port),
            "bindAddress": LOOPBACK,
            "kvConfigPath": str(user_home / "kvConfig.json"),
        }))
        cmd = jvm_command(self.version, NAMESRV_MAIN, NAMESRV_HEAP, self.home, user_home,
                          "rmq.namesrv.logback.xml", ["-c", str(conf)],
                          "disabled" if self.broker_tls_mode == "disabled" else "permissive")
        t0 = time.monotonic()
        self._namesrv = spawn("namesrv", cmd, self.home, user_home, self._root)
        proc = self._namesrv
        _wait_for(lambda: NAMESRV_BOOT.search(proc.stdout_text()), self.start_timeout, proc, "boot line")
        _wait_for(lambda: _tcp_accepts(LOOPBACK, port), self.start_timeout, proc, "TCP accept")
        self.namesrv_addr = f"{LOOPBACK}:{port}"
        self.timings["namesrv_start_s"] = time.monotonic() - t0

    def add_broker(self, name: str, conf: dict[str, str] | None = None) -> BrokerInfo:
        """Start one more official master broker in this cluster; returns once the NameServer lists it."""
        assert self._root is not None and self._store_root is not None and self.namesrv_addr, "not started"
        if any(b.info.name == name for b in self._brokers):
            raise ValueError(f"broker {name!r} already runs in this cluster")
        last_error: ReferenceStartError | None = None
        for _attempt in range(3):
            try:
                return self._start_broker(name, {**self.broker_conf, **(conf or {})})
            except ReferenceStartError as exc:
                # Another process may have taken a probed port in the meantime: retry on new ports.
                if "Address already in use" not in str(exc):
                    raise
                last_error = exc
        assert last_error is not None
        raise last_error

    def _start_broker(self, name: str, extra: dict[str, str]) -> BrokerInfo:
        assert self._root is not None and self._store_root is not None
        listen = pick_ports((-2, 0, 1))
        user_home = self._root / name
        store = self._store_root / name
        if store.exists():
            shutil.rmtree(store)   # a failed earlier attempt on other ports
        conf = user_home / "broker.conf"   # must stay writable: updateBrokerConfig persists into it
        user_home.mkdir(parents=True, exist_ok=True)
        conf.write_text(_properties({
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
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
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
            **({"aclEnable": "true"} if self.plain_acl is not None else {}),
            **(self.authentication.broker_conf() if self.authentication is not None else {}),
            **extra,
        }))
        cmd = jvm_command(self.version, BROKER_MAIN, BROKER_HEAP, self.home, user_home,
                          "rmq.broker.logback.xml", ["-c", str(conf)], self.broker_tls_mode)
        t0 = time.monotonic()
        proc = spawn(name, cmd, self.home, user_home, self._root)
        addr = f"{LOOPBACK}:{listen}"
        info = BrokerInfo(name, addr, listen, store)
        try:
            _wait_for(lambda: BROKER_BOOT.search(proc.stdout_text()), self.start_timeout, proc, "boot line")
            _wait_for(lambda: self._registered(name, addr), self.start_timeout, proc,
                      f"registration of {name} at {addr} in GET_BROKER_CLUSTER_INFO", interval=0.2)
            # Right after boot a 4.9.x broker answers GET_BROKER_RUNTIME_INFO with SYSTEM_ERROR
            # (its TPS sampler has no snapshot yet), which breaks mqadmin clusterList/brokerStatus.
            probe = self._probe_credentials()
            if self.broker_tls_mode != "enforcing":  # the probe speaks plain TCP
                _wait_for(lambda: _runtime_info_ok(addr, probe), self.start_timeout, proc,
                          f"a successful GET_BROKER_RUNTIME_INFO from {name}", interval=0.2)
        except BaseException:
            proc.terminate(timeout=5)
            raise
        with self._lock:
            self._brokers.append(_Broker(info, proc))
        self.timings[f"broker_start_s:{name}"] = time.monotonic() - t0
        return info

    def kill_broker(self, name: str) -> BrokerInfo:
        """SIGKILL one broker's process group, as a crash would; its store directory stays."""
        with self._lock:
            found = next((b for b in self._brokers if b.info.name == name), None)
            if found is None:
                raise ValueError(f"no running broker {name!r} in this cluster")
            self._brokers.remove(found)
        killpg(found.proc.pid, signal.SIGKILL)
        found.proc.popen.wait()
        return found.info

    def _probe_credentials(self) -> tuple[str, str] | None:
        """(access key, secret key) the launcher signs its broker requests with when ACL is on
        (an unsigned request is refused)."""
        if self.plain_acl is not None:
            probe = self.plain_acl.probe_account
            return probe.access_key, probe.secret_key
        if self.authentication is not None:
            return self.authentication.username, self.authentication.password
        return None

    def _registered(self, name: str, addr: str) -> bool:
        try:
            info = get_cluster_info(self.namesrv_addr, timeout=3)
        except (OSError, WireError):
            return False
        return info.master_addr(name) == addr and name in info.clusters.get(self.cluster_name, ())

    def stop(self) -> None:
        """Brokers first (they unregister), then the NameServer; temp dirs go even if a kill failed."""
        with self._lock:
            brokers, self._brokers = self._brokers, []
            namesrv, self._namesrv = self._namesrv, None
        try:
            # A 5.x broker's shutdown hook takes ~10 s (it joins its service threads), so all brokers
            # get SIGTERM together; the NameServer goes last so that they can unregister.
            for b in brokers:
                b.proc.send_term()
            deadline = time.monotonic() + STOP_TIMEOUT
            for b in brokers:
                b.proc.reap(deadline)
            if namesrv is not None:
                namesrv.terminate()
        finally:
            for d in (self._store_root, self._root):
                if d is not None:
                    shutil.rmtree(d, ignore_errors=True)
            self._store_root = self._root = None
            _live.discard(self)


_OWNER = "owner.pid"


def _claim(directory: Path) -> None:
    (directory / _OWNER).write_text(f"{os.getpid()}\n")


def _sweep_orphans(parent: Path, prefix: str) -> None:
    """Remove temp dirs left by a harness process that died without stop() (its JVMs died with it
    through PDEATHSIG). Only dirs whose recorded owner PID is gone are touched."""
    for d in parent.glob(prefix + "*"):
        try:
            owner = int((d / _OWNER).read_text())
        except (OSError, ValueError):
            continue
        if not pid_alive(owner):
            shutil.rmtree(d, ignore_errors=True)


def _tcp_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _properties(values: dict[str, str]) -> str:
    # Values here are paths and plain tokens; java.util.Properties needs only backslashes escaped.
    return "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in values.items())


def pid_alive(pid: int) -> bool:
    """True while /proc shows the PID as a live (non-zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
