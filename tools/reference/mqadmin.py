"""Run the official ``mqadmin`` (MQAdminStartup) against a NameServer and parse what it prints.

mqadmin catches every exception and exits 0, so success is judged from its output: a stack trace,
"ERROR", "command failed", an unknown sub command or a usage dump mean failure.

Starting a JVM per command cost the test suite minutes (30 commands in one test took 228 s on a
busy machine), so commands run in a pool of long-lived JVMs per release (our
tools/reference/java/mqadmin/MqadminSession.java calls ``MQAdminStartup.main0`` per command, with
its own stdout and stderr, and turns the parser's ``System.exit`` into an exit status). Set
``RMQWIRE_MQADMIN_SESSIONS=0`` for one fresh JVM per command, as the mqadmin script runs it.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tools.reference import jars
from tools.reference.cluster import (
    java_env,
    jvm_command,
    killpg,
    pdeathsig,
    run_to_end,
    write_v4_logback,
)
from tools.reference.wire import loads_fastjson

MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
SESSION_MAIN = "MqadminSession"
SESSION_SOURCE = Path(__file__).resolve().parent / "java" / "mqadmin" / "MqadminSession.java"
_MARK = "@@rmqwire-mqadmin@@"
MQADMIN_HEAP = ("-Xms128m", "-Xmx256m")
DEFAULT_TIMEOUT = 60.0

_FAILURE = re.compile(
    r"Exception|^\s*at [\w$.]+\(|\bERROR\b|command failed|The sub command \S+ not exist|^usage: mqadmin",
    re.MULTILINE,
)


class HasNamesrv(Protocol):
    namesrv_addr: str
    version: str


@dataclass(frozen=True, slots=True)
class MqadminResult:
    args: tuple[str, ...]
    stdout: str
    stderr: str
    ok: bool
    returncode: int
    elapsed_s: float
    timed_out: bool = False

    def check(self) -> MqadminResult:
        """Return self, or raise MqadminError carrying the output."""
        if not self.ok:
            raise MqadminError(self)
        return self


class MqadminError(RuntimeError):
    def __init__(self, result: MqadminResult) -> None:
        super().__init__(f"mqadmin {' '.join(result.args)} failed"
                         f"{' (timed out)' if result.timed_out else ''}:\n{result.stdout[-3000:]}"
                         f"{result.stderr[-3000:]}")
        self.result = result


def parse_broker_status(text: str) -> dict[str, str]:
    """``brokerStatus``'s "key : value" lines as a table (keys stripped of their padding)."""
    table = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            table[key.strip()] = value.strip()
    return table


def run_mqadmin(cluster_or_namesrv: HasNamesrv | str, *args: str, timeout: float = DEFAULT_TIMEOUT,
                version: str | None = None, acl: tuple[str, str] | None = None,
                jvm_args: tuple[str, ...] = ()) -> MqadminResult:
    """``mqadmin <args> -n <namesrv>``; the version comes from the cluster, else ``version``/default.

    ``acl`` (access key, secret key) goes into ``ROCKETMQ_HOME/conf/tools.yml``, where mqadmin
    reads the keys its AclClientRPCHook signs with; ``jvm_args`` are extra -D options (e.g.
    ``-Dtls.enable=true``, read once per JVM). Either runs a fresh JVM of its own."""
    if isinstance(cluster_or_namesrv, str):
        namesrv, version = cluster_or_namesrv, version or jars.DEFAULT_VERSION
    else:
        namesrv, version = cluster_or_namesrv.namesrv_addr, version or cluster_or_namesrv.version
    if "-n" in args:
        raise ValueError("pass the NameServer as the first argument, not with -n")
    argv = (*args, "-n", namesrv)   # always -n: without it the client looks up jmenv.tbsite.net over HTTP
    if acl is not None or jvm_args or os.environ.get("RMQWIRE_MQADMIN_SESSIONS", "1") == "0":
        return _run_fresh(version, argv, timeout, acl=acl, jvm_args=jvm_args)
    return _POOL.run(version, argv, timeout)


def _judge(argv: tuple[str, ...], stdout_b: bytes, stderr_b: bytes, returncode: int, elapsed_s: float,
           timed_out: bool) -> MqadminResult:
    stdout, stderr = stdout_b.decode(errors="replace"), stderr_b.decode(errors="replace")
    ok = not timed_out and returncode == 0 and not _FAILURE.search(stdout + "\n" + stderr)
    return MqadminResult(argv, stdout, stderr, ok, returncode, elapsed_s, timed_out)


def _home(work: Path, version: str) -> Path:
    home = work / "home"
    home.mkdir()
    if jars.is_v4(version):
        write_v4_logback(home)
    return home


def _run_fresh(version: str, argv: tuple[str, ...], timeout: float, *, acl: tuple[str, str] | None = None,
               jvm_args: tuple[str, ...] = ()) -> MqadminResult:
    work = Path(tempfile.mkdtemp(prefix="rmqwire-mqadmin-"))
    try:
        home = _home(work, version)
        if acl is not None:
            (home / "conf").mkdir(exist_ok=True)
            (home / "conf" / "tools.yml").write_text(
                f"accessKey: {json.dumps(acl[0])}\nsecretKey: {json.dumps(acl[1])}\n")
        cmd = jvm_command(version, MQADMIN_MAIN, (*MQADMIN_HEAP, *jvm_args), home, work / "user",
                          "rmq.tools.logback.xml", list(argv))
        run = run_to_end(cmd, cwd=work, env=java_env(home), timeout=timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _judge(argv, run.stdout, run.stderr, run.returncode, run.elapsed_s, run.stopped)


class MqadminSession:
    """One long-lived JVM running mqadmin commands one after another (see the module docstring)."""

    START_TIMEOUT = 120.0

    def __init__(self, version: str) -> None:
        self.version = version
        self.work = Path(tempfile.mkdtemp(prefix="rmqwire-mqadmin-session-"))
        home = _home(self.work, version)
        classes = jars.compile_java([SESSION_SOURCE], "mqadmin-session", version)
        cmd = jvm_command(version, SESSION_MAIN, MQADMIN_HEAP, home, self.work / "user",
                          "rmq.tools.logback.xml", [])
        cp = cmd.index("-cp") + 1
        cmd[cp] = f"{classes}:{cmd[cp]}"
        # Java 17 warns that the SecurityManager is deprecated; "allow" keeps it working on later JDKs.
        cmd.insert(1, "-Djava.security.manager=allow")
        self._stderr = open(self.work / "jvm.err", "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     cwd=self.work, env=java_env(home), start_new_session=True,
                                     preexec_fn=pdeathsig)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name=f"mqadmin-session-{self.proc.pid}", daemon=True).start()
        try:
            line = self._next(self.START_TIMEOUT)
        except BaseException:
            self.close()
            raise
        if line != f"{_MARK} ready":
            self.close()
            raise RuntimeError(f"mqadmin session did not start: {line!r}\n{self._jvm_stderr()}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith(_MARK):
                self._lines.put(line)
        self._lines.put(None)

    def _next(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            raise RuntimeError(f"mqadmin session JVM ended (exit {self.proc.poll()})\n{self._jvm_stderr()}")
        return line

    def _jvm_stderr(self) -> str:
        try:
            return (self.work / "jvm.err").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, argv: tuple[str, ...], timeout: float) -> MqadminResult:
        """One command; on a timeout the JVM is killed (a fresh JVM would have been too)."""
        t0 = time.monotonic()
        assert self.proc.stdin is not None
        encoded = " ".join(base64.b64encode(a.encode()).decode() for a in argv)
        self.proc.stdin.write(encoded.encode() + b"\n")
        self.proc.stdin.flush()
        try:
            line = self._next(timeout)
        except TimeoutError:
            self.close()
            return _judge(argv, b"", b"", -signal.SIGKILL, time.monotonic() - t0, True)
        _mark, status, out, err = (line.split(" ") + ["", ""])[:4]
        return _judge(argv, base64.b64decode(out), base64.b64decode(err), int(status),
                      time.monotonic() - t0, False)

    def close(self) -> None:
        if self.proc.poll() is None:
            killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._stderr.close()
        shutil.rmtree(self.work, ignore_errors=True)


class _SessionPool:
    """Idle sessions per release; a caller takes one (or starts one) and gives it back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, list[MqadminSession]] = {}
        self._all: list[MqadminSession] = []
        atexit.register(self.close)

    def run(self, version: str, argv: tuple[str, ...], timeout: float) -> MqadminResult:
        session = self._take(version)
        try:
            result = session.run(argv, timeout)
        except BaseException:
            session.close()  # in an unknown state (interrupted mid-command): never reused
            raise
        if session.alive:
            with self._lock:
                self._idle.setdefault(version, []).append(session)
        return result

    def _take(self, version: str) -> MqadminSession:
        with self._lock:
            idle = self._idle.setdefault(version, [])
            while idle:
                session = idle.pop()
                if session.alive:
                    return session
                session.close()
        session = MqadminSession(version)
        with self._lock:
            self._all = [s for s in self._all if s.alive] + [session]
        return session

    def close(self) -> None:
        with self._lock:
            sessions, self._all, self._idle = self._all, [], {}
        for session in sessions:
            session.close()


_POOL = _SessionPool()


def close_mqadmin_sessions() -> None:
    """Stop the pooled mqadmin JVMs (also done at interpreter exit)."""
    _POOL.close()


# --------------------------------------------------------------------------- parsers

@dataclass(frozen=True, slots=True)
class ClusterListRow:
    cluster_name: str
    broker_name: str
    broker_id: int
    addr: str
    version: str


def parse_cluster_list(stdout: str) -> list[ClusterListRow]:
    """``clusterList``: the leading columns (#Cluster Name, #Broker Name, #BID, #Addr, #Version)."""
    rows = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5 and not parts[0].startswith("#") and parts[2].isdigit() and ":" in parts[3]:
            rows.append(ClusterListRow(parts[0], parts[1], int(parts[2]), parts[3], parts[4]))
    return rows


def parse_topic_list(stdout: str) -> list[str]:
    """``topicList`` (without -c): one topic per line."""
    return [line.strip() for line in stdout.splitlines() if line.strip() and " " not in line.strip()]


def parse_topic_route(stdout: str) -> dict[str, Any]:
    """``topicRoute -t T``: TopicRouteData as pretty fastjson (numeric map keys come back as str)."""
    start = stdout.find("{")
    end = stdout.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"no JSON object in topicRoute output: {stdout[:500]!r}")
    return loads_fastjson(stdout[start:end + 1])


@dataclass(frozen=True, slots=True)
class TopicStatusRow:
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_updated: str


def parse_topic_status(stdout: str) -> list[TopicStatusRow]:
    """``topicStatus -t T``: per-queue offsets (the last column is a free-form timestamp)."""
    rows = []
    for line in stdout.splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 4 and not parts[0].startswith("#") and all(p.lstrip("-").isdigit() for p in parts[1:4]):
            rows.append(TopicStatusRow(parts[0], int(parts[1]), int(parts[2]), int(parts[3]),
                                       parts[4].strip() if len(parts) > 4 else ""))
    return rows


@dataclass(frozen=True, slots=True)
class UpdateTopicResult:
    broker_addrs: tuple[str, ...]       # "create topic to <addr> success."
    topic_config: dict[str, str]        # parsed from the TopicConfig [k=v, ...] line


_CREATED = re.compile(r"create topic to (\S+) success\.")
_TOPIC_CONFIG = re.compile(r"TopicConfig \[(.*)\]")


def parse_update_topic(stdout: str) -> UpdateTopicResult:
    addrs = tuple(_CREATED.findall(stdout))
    config: dict[str, str] = {}
    m = _TOPIC_CONFIG.search(stdout)
    if m:
        # Values such as attributes={} hold no ", " so a plain split is enough here.
        for item in m.group(1).split(", "):
            key, sep, value = item.partition("=")
            if sep:
                config[key.strip()] = value.strip()
    return UpdateTopicResult(addrs, config)


def parse_query_msg_by_key(stdout: str) -> list[tuple[str, int, int]]:
    """``queryMsgByKey``: (message id, queue id, queue offset) per row."""
    rows = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and re.fullmatch(r"[0-9A-F]{32,}", parts[0]) and parts[1].isdigit():
            rows.append((parts[0], int(parts[1]), int(parts[2])))
    return rows


#: mqadmin's own calls time out now and then on a loaded machine (its NameServer lookups get the
#: client's 3 s budget, JVM start-up included).
TRANSIENT = re.compile(r"RemotingTimeoutException|RemotingConnectException|RemotingSendRequestException")


def run_mqadmin_retrying(cluster_or_namesrv: HasNamesrv | str, *args: str, attempts: int = 5,
                         **kw: Any) -> MqadminResult:
    """``run_mqadmin``, again while the run failed on a remoting timeout or printed nothing at
    all (mqadmin's asynchronous queries print nothing when the answer comes late)."""
    for _ in range(attempts):
        r = run_mqadmin(cluster_or_namesrv, *args, **kw)
        if (r.stdout.strip() or r.stderr.strip()) and not TRANSIENT.search(r.stdout + r.stderr):
            break
    return r
