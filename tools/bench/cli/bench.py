"""Wall time of ``rmqadmin`` against the official ``mqadmin``, same cluster, same run.

Commands: clusterList, topicStatus -t T, consumerProgress -g G, queryMsgById -t T -i ID. Each is
run R times by each tool, interleaved (mqadmin, rmqadmin, mqadmin, ...), as a user runs it: a new
process every time, start-up included (the JVM for mqadmin, the interpreter for rmqadmin). Both
outputs are checked to be non-empty and successful. The median and the best of each are printed,
with the ratio of the medians. Goal: rmqadmin at least 10x faster.

Run from the repo root: ``python -m tools.bench.cli [--runs R] [-n ADDR] [--json]``. Without
``-n`` an official 5.3.3 NameServer + Broker is started (and stopped) for the run, with a topic
of 8 messages and a consumer group that consumed them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

ROOT = Path(__file__).resolve().parents[3]
GOAL = 10.0


@dataclass
class Timing:
    command: str
    mqadmin_s: list[float] = field(default_factory=list)
    rmqadmin_s: list[float] = field(default_factory=list)
    #: CPU seconds (user + system) of each run's process tree: less sensitive to a busy machine
    mqadmin_cpu_s: list[float] = field(default_factory=list)
    rmqadmin_cpu_s: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.mqadmin_s) / statistics.median(self.rmqadmin_s)

    @property
    def cpu_ratio(self) -> float:
        return statistics.median(self.mqadmin_cpu_s) / statistics.median(self.rmqadmin_cpu_s)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measured(fn: Callable[[], float]) -> tuple[float, float]:
    """(wall seconds as the function reports them, CPU seconds of the processes it ran)."""
    before = children_cpu()
    wall = fn()
    return wall, children_cpu() - before


def rmqadmin_argv() -> list[str]:
    """The installed console script when there is one (what users run), else ``-m``."""
    script = Path(sys.executable).parent / "rmqadmin"
    if script.exists():
        return [str(script)]
    found = shutil.which("rmqadmin")
    return [found] if found else [sys.executable, "-m", "rmqwire", "admin"]


def time_rmqadmin(namesrv: str, args: list[str], cwd: Path) -> float:
    # As installed by pip, the modules' bytecode is cached: let the untimed run write it (this
    # repository's environment may set PYTHONDONTWRITEBYTECODE).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(cwd / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.monotonic()
    p = subprocess.run([*rmqadmin_argv(), *args, "-n", namesrv], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=120)
    elapsed = time.monotonic() - t0
    if p.returncode != 0 or not p.stdout:
        raise RuntimeError(f"rmqadmin {' '.join(args)} failed: {p.stderr.strip()}")
    return elapsed


#: mqadmin failed (its ``ok`` also refuses the word "Exception", which message tracks print).
JAVA_FAILURE = re.compile(r"^\s+at [\w$.]+\(|command failed", re.M)


def time_mqadmin(namesrv: str, args: list[str]) -> float:
    from tools.reference.mqadmin import run_mqadmin

    r = run_mqadmin(namesrv, *args, timeout=120)
    if r.returncode != 0 or r.timed_out or JAVA_FAILURE.search(r.stdout) or not r.stdout:
        raise RuntimeError(f"mqadmin {' '.join(args)} failed: {(r.stdout + r.stderr)[-500:]}")
    return r.elapsed_s


def prepare(namesrv: str, cluster_name: str) -> tuple[str, str, str]:
    """A topic with 8 messages and a group that consumed them: (topic, group, offset msg id)."""
    from tools.peers.java_peer import JavaPeer
    from tools.reference.mqadmin import run_mqadmin

    suffix = uuid.uuid4().hex[:8]
    topic, group = f"CliBench_{suffix}", f"CliBenchGroup_{suffix}"
    run_mqadmin(namesrv, "updateTopic", "-c", cluster_name, "-t", topic, "-r", "4", "-w",
                "4").check()
    peer = JavaPeer(namesrv)
    sent = peer.produce(topic, 8, keys="k{i}", tag="TagA", body="bench {i}")
    peer.consume(topic, 8, group=group)  # commits its offsets when it shuts down
    return topic, group, sent[0].offset_msg_id


def run(namesrv: str, cluster_name: str, runs: int) -> list[Timing]:
    topic, group, msg_id = prepare(namesrv, cluster_name)
    commands = {
        "clusterList": ["clusterList"],
        "topicStatus": ["topicStatus", "-t", topic],
        "consumerProgress -g": ["consumerProgress", "-g", group],
        "queryMsgById": ["queryMsgById", "-t", topic, "-i", msg_id],
    }
    timings = []
    with tempfile.TemporaryDirectory(prefix="rmqwire-clibench-") as tmp:
        work = Path(tmp)
        for name, args in commands.items():
            t = Timing(name)
            time_rmqadmin(namesrv, args, work)  # warm the OS caches once for each, not timed
            time_mqadmin(namesrv, args)
            for _ in range(runs):
                wall, cpu = measured(functools.partial(time_mqadmin, namesrv, args))
                t.mqadmin_s.append(wall)
                t.mqadmin_cpu_s.append(cpu)
                wall, cpu = measured(functools.partial(time_rmqadmin, namesrv, args, work))
                t.rmqadmin_s.append(wall)
                t.rmqadmin_cpu_s.append(cpu)
            timings.append(t)
    return timings


def report(timings: list[Timing], as_json: bool, conditions: dict[str, str]) -> None:
    if as_json:
        print(json.dumps({"conditions": conditions, "goal": GOAL, "commands": [
            {"command": t.command, "mqadmin_s": t.mqadmin_s, "rmqadmin_s": t.rmqadmin_s,
             "mqadmin_median_s": statistics.median(t.mqadmin_s),
             "rmqadmin_median_s": statistics.median(t.rmqadmin_s), "ratio": t.ratio,
             "mqadmin_cpu_s": t.mqadmin_cpu_s, "rmqadmin_cpu_s": t.rmqadmin_cpu_s,
             "cpu_ratio": t.cpu_ratio}
            for t in timings]}, indent=2))
        return
    for k, v in conditions.items():
        print(f"# {k}: {v}")
    print(f"{'wall time':<22} {'mqadmin median':>15} {'(best)':>8} {'rmqadmin median':>16} "
          f"{'(best)':>8} {'ratio':>7}  goal >= {GOAL:g}x")
    for t in timings:
        ok = "ok" if t.ratio >= GOAL else "BELOW GOAL"
        print(f"{t.command:<22} {statistics.median(t.mqadmin_s):>14.3f}s {min(t.mqadmin_s):>7.3f}s "
              f"{statistics.median(t.rmqadmin_s):>15.3f}s {min(t.rmqadmin_s):>7.3f}s "
              f"{t.ratio:>6.1f}x  {ok}")
    print(f"{'CPU time (user+sys)':<22} {'mqadmin median':>15} {'':>8} {'rmqadmin median':>16} "
          f"{'':>8} {'ratio':>7}")
    for t in timings:
        print(f"{t.command:<22} {statistics.median(t.mqadmin_cpu_s):>14.3f}s {'':>8} "
              f"{statistics.median(t.rmqadmin_cpu_s):>15.3f}s {'':>8} {t.cpu_ratio:>6.1f}x")


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.cli",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command and tool")
    parser.add_argument("-n", "--namesrv", default=None,
                        help="use this running cluster's NameServer instead of starting one")
    parser.add_argument("--cluster-name", default="DefaultCluster")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    # A fresh JVM per mqadmin run, as a user starts it: the tests' pooled mqadmin sessions would
    # time a warm JVM and count none of its CPU.
    os.environ["RMQWIRE_MQADMIN_SESSIONS"] = "0"
    conditions = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpus": str(os.cpu_count()),
        "load average before": loadavg(),
        "rmqadmin": " ".join(rmqadmin_argv()),
        "runs": f"{args.runs} per command and tool, interleaved, after one untimed run each",
    }
    if args.namesrv:
        timings = run(args.namesrv, args.cluster_name, args.runs)
    else:
        from tools.reference.cluster import ReferenceCluster

        with ReferenceCluster(version="5.3.3") as cluster:
            timings = run(cluster.namesrv_addr, cluster.cluster_name, args.runs)
    conditions["load average after"] = loadavg()
    report(timings, args.json, conditions)
    return 0 if all(t.ratio >= GOAL for t in timings) else 1
