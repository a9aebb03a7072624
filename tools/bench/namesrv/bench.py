"""Side-by-side NameServer benchmark: rmqwire's NameServer against the official 5.3.3 one.

Both servers run at once on loopback: the official ``NamesrvStartup`` JVM and ``rmqwire namesrv``
(a Python process, as users run it). One load generator (NamesrvBench.java, built on the official
client remoting classes) is run against each in turn, interleaved round by round:

* GET_ROUTEINFO_BY_TOPIC for random topics from 16 connections (one synchronous caller each, as a
  client's route lookups are), with 1 000 topics registered by 4 brokers;
* REGISTER_BROKER with 1 000 topics per broker from 4 connections (each its own broker): with a
  new DataVersion every time (the full update path), and with the same body again (a broker's
  periodic re-registration, every 30 s in production).

Each figure is the best of the rounds (requests completed inside the measuring window / window).
The servers and the load generator share the machine's cores, so the figures compare the two
servers under identical conditions rather than measuring either alone.

Run from the repo root: ``python -m tools.bench.namesrv [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tools.reference import cluster, jars  # noqa: E402
from tools.rmqwire_process import RmqwireNamesrv  # noqa: E402

HERE = Path(__file__).resolve().parent
JAVA_SOURCE = HERE / "NamesrvBench.java"
VERSION = "5.3.3"
MODES = ("route", "register", "reregister")
#: Goal of the issue: rmqwire's lookups at least 0.8x the official NameServer's.
ROUTE_GOAL = 0.8


@dataclasses.dataclass(frozen=True)
class Settings:
    rounds: int
    warmup_s: float
    measure_s: float
    connections: int = 16
    inflight: int = 1
    topics: int = 1000
    brokers: int = 4
    register_connections: int = 4


FULL = Settings(rounds=3, warmup_s=5.0, measure_s=10.0)
QUICK = Settings(rounds=1, warmup_s=2.0, measure_s=4.0)


@dataclasses.dataclass
class Sample:
    target: str
    mode: str
    per_s: float
    errors: int
    first_error: str
    #: CPU time the server used per request over the whole run (warm-up included).
    cpu_us_per_request: float | None = None


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (and its waited-for children), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(x) for x in fields[11:15]) / _CLK_TCK


class OfficialNamesrv:
    """The official NameServer JVM alone (the reference cluster's launcher pieces)."""

    def __init__(self, version: str = VERSION) -> None:
        self.version = version
        self.root = Path(tempfile.mkdtemp(prefix="rmqwire-nsbench-"))
        self.proc: cluster.JvmProcess | None = None
        self.addr = ""

    def start(self) -> OfficialNamesrv:
        port = cluster.pick_ports((0,))
        home, user_home = self.root / "home", self.root / "namesrv"
        home.mkdir()
        conf = self.root / "namesrv.properties"
        conf.write_text(f"listenPort={port}\nbindAddress={cluster.LOOPBACK}\n"
                        f"kvConfigPath={user_home / 'kvConfig.json'}\n")
        cmd = cluster.jvm_command(self.version, cluster.NAMESRV_MAIN, cluster.NAMESRV_HEAP, home,
                                  user_home, "rmq.namesrv.logback.xml", ["-c", str(conf)])
        self.proc = cluster.spawn("namesrv", cmd, home, user_home, self.root)
        deadline = time.monotonic() + cluster.START_TIMEOUT
        while not cluster.NAMESRV_BOOT.search(self.proc.stdout_text()):
            if not self.proc.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"official NameServer did not start:\n{self.proc.tail()}")
            time.sleep(0.1)
        self.addr = f"{cluster.LOOPBACK}:{port}"
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
        shutil.rmtree(self.root, ignore_errors=True)


def run_load(addr: str, mode: str, s: Settings, classes: Path) -> dict:
    conns = s.connections if mode == "route" else s.register_connections
    brokers = s.brokers if mode == "route" else 0
    cmd = [jars.java_bin(), "-Xms256m", "-Xmx256m", "-XX:+UseG1GC",
           f"-Duser.home={classes.parent / 'bench-home'}",
           "-Drmq.logback.configurationFile=rmq.client.logback.xml",
           "-cp", f"{classes}:{jars.lib_dir(VERSION)}/*", "NamesrvBench", mode, addr, str(conns),
           str(s.inflight), str(s.warmup_s), str(s.measure_s), str(s.topics), str(brokers)]
    out = subprocess.run(cmd, capture_output=True, text=True,
                         timeout=s.warmup_s + s.measure_s + 180)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("{")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"load generator failed ({out.returncode}):\n{out.stdout[-2000:]}"
                           f"{out.stderr[-3000:]}")
    return json.loads(line)


def median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def cpu_model() -> str:
    try:
        m = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
        return m.group(1) if m else platform.processor()
    except OSError:
        return platform.processor()


def run(s: Settings) -> dict:
    jars.ensure_jars(VERSION)
    classes = jars.compile_java([JAVA_SOURCE], "namesrv-bench", VERSION)
    load_before = loadavg()
    official = OfficialNamesrv().start()
    ours = RmqwireNamesrv({"scanNotActiveBrokerInterval": "5000"})
    samples: list[Sample] = []
    try:
        ours.start()
        targets = {"official": official.addr, "rmqwire": ours.addr}
        pids = {"official": official.proc.pid, "rmqwire": ours.popen.pid}
        for r in range(s.rounds):
            for mode in MODES:
                order = ["official", "rmqwire"] if r % 2 == 0 else ["rmqwire", "official"]
                for target in order:
                    cpu0 = cpu_seconds(pids[target])
                    res = run_load(targets[target], mode, s, classes)
                    cpu1 = cpu_seconds(pids[target])
                    cpu_us = None
                    if cpu0 is not None and cpu1 is not None and res.get("total"):
                        cpu_us = (cpu1 - cpu0) / res["total"] * 1e6
                    samples.append(Sample(target, mode, res["requests"] / res["seconds"],
                                          res["errors"], res.get("firstError", ""), cpu_us))
                    print(f"round {r + 1} {mode:10} {target:8} {samples[-1].per_s:10.1f}/s"
                          f"  {cpu_us or 0:8.1f} CPU us/request  errors {res['errors']}",
                          file=sys.stderr, flush=True)
    finally:
        official.stop()
        rc = ours.stop()
        ours.close()
    rows = []
    labels = {"route": "GET_ROUTEINFO_BY_TOPIC",
              "register": f"REGISTER_BROKER ({s.topics} topics, changed)",
              "reregister": f"REGISTER_BROKER ({s.topics} topics, same)"}
    for mode, label in labels.items():
        best = {}
        med = {}
        errors = {}
        for target in ("official", "rmqwire"):
            rates = [x.per_s for x in samples if x.mode == mode and x.target == target]
            best[target] = max(rates)
            med[target] = median(rates)
            errors[target] = sum(x.errors for x in samples if x.mode == mode and x.target == target)
        ratio = best["rmqwire"] / best["official"] if best["official"] else None
        cpu = {}
        for target in ("official", "rmqwire"):
            costs = [x.cpu_us_per_request for x in samples
                     if x.mode == mode and x.target == target and x.cpu_us_per_request]
            cpu[target] = median(costs) if costs else None
        rows.append({
            "operation": label, "mode": mode,
            "official_per_s": best["official"], "rmqwire_per_s": best["rmqwire"],
            "official_median_per_s": med["official"], "rmqwire_median_per_s": med["rmqwire"],
            "official_cpu_us": cpu["official"], "rmqwire_cpu_us": cpu["rmqwire"],
            "ratio": ratio, "errors": errors,
            "goal": ROUTE_GOAL if mode == "route" else None,
        })
    first_errors = sorted({x.first_error for x in samples if x.first_error})
    conditions = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpu": f"{cpu_model()}, {os.cpu_count()} logical CPUs (servers and load generator share them)",
        "load average before / after": f"{load_before} / {loadavg()}",
        "route lookups": f"{s.connections} connections x {s.inflight} synchronous caller(s), "
        f"{s.topics} topics registered by {s.brokers} brokers (4 queue datas per route)",
        "registrations": f"{s.register_connections} connections (one broker each), {s.topics} topics "
        "per body; 'changed': a new DataVersion each time, 'same': the same body again",
        "rounds": f"{s.rounds} (interleaved), warm-up {s.warmup_s} s, window {s.measure_s} s; best kept",
        "official": f"RocketMQ {VERSION} NamesrvStartup, heap {' '.join(cluster.NAMESRV_HEAP)}",
        "rmqwire namesrv exit code": rc,
    }
    if first_errors:
        conditions["first errors seen"] = "; ".join(first_errors)[:500]
    return {"rows": rows, "conditions": conditions,
            "samples": [dataclasses.asdict(x) for x in samples]}


def format_table(report: dict) -> str:
    head = f"{'operation':<44} {'official/s':>12} {'rmqwire/s':>12} {'ratio':>7} {'goal':>6}"
    lines = [head, "-" * len(head)]
    for r in report["rows"]:
        goal = "" if r["goal"] is None else (
            f"{'PASS' if r['ratio'] and r['ratio'] >= r['goal'] else 'FAIL'}")
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"{r['operation']:<44} {r['official_per_s']:>12,.0f} {r['rmqwire_per_s']:>12,.0f}"
                     f" {ratio:>7} {goal:>6}")
        lines.append(f"{'  (medians)':<44} {r['official_median_per_s']:>12,.0f}"
                     f" {r['rmqwire_median_per_s']:>12,.0f}")
        if r["official_cpu_us"] and r["rmqwire_cpu_us"]:
            lines.append(f"{'  server CPU us per request (median)':<44} {r['official_cpu_us']:>12,.1f}"
                         f" {r['rmqwire_cpu_us']:>12,.1f}"
                         f" {r['official_cpu_us'] / r['rmqwire_cpu_us']:>7.2f}")
    lines.append("")
    lines.append(f"ratio = rmqwire / official (best of the rounds); goal for lookups: "
                 f">= {ROUTE_GOAL}x. The CPU line's ratio is official / rmqwire CPU per request")
    lines.append("(above 1: rmqwire needs less CPU per request); it is steadier than rates on a busy"
                 " machine.")
    lines.append("")
    lines.append("Conditions:")
    for k, v in report["conditions"].items():
        lines.append(f"  {k}: {v}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.namesrv",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short round (about 1 min)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--inflight", type=int, default=None,
                        help="synchronous callers per connection (default 1)")
    args = parser.parse_args(argv)
    s = QUICK if args.quick else FULL
    if args.rounds:
        s = dataclasses.replace(s, rounds=args.rounds)
    if args.inflight:
        s = dataclasses.replace(s, inflight=args.inflight)
    report = run(s)
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
