"""Run the official ``mqadmin`` (MQAdminStartup) against a NameServer and parse what it prints.

mqadmin catches every exception and exits 0, so success is judged from its output: a stack trace,
"ERROR", "command failed", an unknown sub command or a usage dump mean failure.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tools.reference import jars
from tools.reference.cluster import java_env, jvm_command, run_to_end, write_v4_logback
from tools.reference.wire import loads_fastjson

MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
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


def run_mqadmin(cluster_or_namesrv: HasNamesrv | str, *args: str, timeout: float = DEFAULT_TIMEOUT,
                version: str | None = None) -> MqadminResult:
    """``mqadmin <args> -n <namesrv>``; the version comes from the cluster, else ``version``/default."""
    if isinstance(cluster_or_namesrv, str):
        namesrv, version = cluster_or_namesrv, version or jars.DEFAULT_VERSION
    else:
        namesrv, version = cluster_or_namesrv.namesrv_addr, version or cluster_or_namesrv.version
    if "-n" in args:
        raise ValueError("pass the NameServer as the first argument, not with -n")
    argv = (*args, "-n", namesrv)   # always -n: without it the client looks up jmenv.tbsite.net over HTTP
    work = Path(tempfile.mkdtemp(prefix="rmqwire-mqadmin-"))
    try:
        home = work / "home"
        home.mkdir()
        if jars.is_v4(version):
            write_v4_logback(home)
        cmd = jvm_command(version, MQADMIN_MAIN, MQADMIN_HEAP, home, work / "user",
                          "rmq.tools.logback.xml", list(argv))
        run = run_to_end(cmd, cwd=work, env=java_env(home), timeout=timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stdout, stderr = run.stdout.decode(errors="replace"), run.stderr.decode(errors="replace")
    ok = not run.stopped and run.returncode == 0 and not _FAILURE.search(stdout + "\n" + stderr)
    return MqadminResult(tuple(argv), stdout, stderr, ok, run.returncode, run.elapsed_s, run.stopped)


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
