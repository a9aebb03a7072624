"""Side-by-side broker benchmark: the official 5.3.3 Broker, then rmqwire's, same machine and disk.

The load is the official benchmark tool (rocketmq-example, tools/reference/benchmark.py): its
``Producer`` (single messages) or ``BatchProducer`` (batches of 16), 1 KiB bodies, 16 threads, for a
fixed duration, against a topic of 8 queues that only the broker under test serves. Each broker is
started fresh for each scenario (its own store under one parent directory), registered with one
official NameServer, and stopped after the run. Scenarios: single messages (ASYNC_FLUSH), batches
of 16 (ASYNC_FLUSH), single messages with SYNC_FLUSH.

Printed per scenario and broker: messages stored per second (the topic's queue ends over the
run's duration), the tool's mean and max RT (its per-second reports after a warm-up), send
failures, broker CPU seconds per million messages and resident memory at the end (VmRSS, which
counts the pages of the mapped store files, and its anonymous part); then the ratio rmqwire /
official.

    python -m tools.bench.broker [--seconds 30] [--threads 16] [--only single batch16 sync] [--json]
    python -m tools.bench.broker --profile prof.out --only single   # cProfile of the rmqwire broker
    python -m tools.bench.broker --trace sync.txt --only sync --rmqwire-only   # put -> fsync -> answer
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from rmqwire.codec import RequestCode  # noqa: E402
from tools.peers.topics import create_topic  # noqa: E402
from tools.reference import jars  # noqa: E402
from tools.reference.benchmark import (  # noqa: E402
    BENCHMARK_PRODUCER,
    EXAMPLE_VERSION,
    _command,
    ensure_benchmark_jars,
)
from tools.reference.cluster import ReferenceCluster, _live, run_to_end  # noqa: E402
from tools.reference.wire import request  # noqa: E402
from tools.rmqwire_broker import RmqwireBroker  # noqa: E402

BATCH_PRODUCER = "org.apache.rocketmq.example.benchmark.BatchProducer"
QUEUES = 8
WARMUP_REPORTS = 3
SCENARIOS = {
    "single": (BENCHMARK_PRODUCER, "ASYNC_FLUSH"),
    "batch16": (BATCH_PRODUCER, "ASYNC_FLUSH"),
    "sync": (BENCHMARK_PRODUCER, "SYNC_FLUSH"),
}
_FIELDS = {
    "tps": re.compile(r"Send TPS:\s*(\d+)"),
    "max": re.compile(r"Max RT\(ms\):\s*(\d+)"),
    "avg": re.compile(r"Average RT\(ms\):\s*([\d.]+)"),
    "failed": re.compile(r"Send Failed:\s*(\d+)"),
    "rfailed": re.compile(r"(?:Response|Send Message) Failed:\s*(\d+)"),
}


def parse_reports(output: str) -> list[tuple[float, float, float, float, float]]:
    """(TPS, max RT, mean RT, send failed, response failed) of each report line of Producer or
    BatchProducer (the latter's TPS counts batches, its RT is per batch)."""
    rows = []
    for line in output.splitlines():
        if not line.startswith("Current Time"):
            continue
        found = {k: r.search(line) for k, r in _FIELDS.items()}
        if all(found.values()):
            rows.append(tuple(float(found[k].group(1)) for k in ("tps", "max", "avg", "failed", "rfailed")))
    return rows


class _Namesrv(ReferenceCluster):
    """The official NameServer alone; brokers come and go with ``add_broker`` / ``kill_broker``."""

    def start(self) -> _Namesrv:
        jars.ensure_jars(self.version)
        _live.add(self)
        self._prepare_dirs()
        self._start_namesrv()
        return self


@dataclass
class Run:
    broker: str
    scenario: str
    stored: int
    seconds: float
    tps: float
    mean_rt_ms: float | None
    max_rt_ms: int | None
    send_failed: int
    cpu_s_per_million: float | None
    rss_mib: float | None
    anon_mib: float | None
    load: tuple[float, float, float]


def _tree(pid: int) -> list[int]:
    """The process and its live descendants (the rmqwire broker's SYNC_FLUSH helper counts)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            pass
    return out


def _proc_cpu(pid: int) -> float:
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _proc_memory(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) in bytes, of the process and its descendants: the resident set counts
    the mapped store files' pages; the anonymous part is the processes' own memory."""
    found = {"VmRSS": 0, "RssAnon": 0}
    for p in _tree(pid):
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(":")
            if key in found:
                found[key] += int(value.split()[0]) * 1024
    return found["VmRSS"], found["RssAnon"]


def _stored(broker_addr: str, topic: str) -> int:
    total = 0
    for q in range(QUEUES):
        reply = request(broker_addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)}, timeout=10)
        total += int((reply.ext_fields or {}).get("offset", 0))
    return total


def _drive(namesrv: str, broker_addr: str, pid: int, kind: str, scenario: str, seconds: float,
           threads: int) -> Run:
    main, _flush = SCENARIOS[scenario]
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    create_topic(broker_addr, topic, queues=QUEUES, namesrv_addr=namesrv)
    work = Path(tempfile.mkdtemp(prefix="rmqwire-bench-"))
    args = ["-n", namesrv, "-t", topic, "-w", str(threads), "-s", "1024", "-ri", "1000"]
    cmd = _command(main, tuple(args), work, EXAMPLE_VERSION)
    before_stored = _stored(broker_addr, topic)
    cpu0 = _proc_cpu(pid)
    t0 = time.monotonic()
    try:
        out = run_to_end(cmd, cwd=work, env=None, timeout=seconds, term_grace=15, merge_stderr=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - t0
    cpu = _proc_cpu(pid) - cpu0
    stored = _stored(broker_addr, topic) - before_stored
    memory = _proc_memory(pid)
    reports = parse_reports(out.stdout.decode(errors="replace"))
    steady = reports[WARMUP_REPORTS:] or reports
    weights = sum(r[0] for r in steady)
    mean_rt = sum(r[0] * r[2] for r in steady) / weights if weights else None
    return Run(
        broker=kind, scenario=scenario, stored=stored, seconds=round(elapsed, 1),
        tps=round(stored / elapsed, 1) if elapsed else 0.0,
        mean_rt_ms=round(mean_rt, 2) if mean_rt is not None else None,
        max_rt_ms=int(max(r[1] for r in steady)) if steady else None,
        send_failed=int(sum(r[3] + r[4] for r in reports)),
        cpu_s_per_million=round(cpu / stored * 1e6, 1) if stored else None,
        rss_mib=round(memory[0] / 2**20, 1),
        anon_mib=round(memory[1] / 2**20, 1),
        load=os.getloadavg(),
    )


def run_official(ns: _Namesrv, scenario: str, seconds: float, threads: int, index: int) -> Run:
    flush = SCENARIOS[scenario][1]
    name = f"official-{index}"
    info = ns.add_broker(name, {"flushDiskType": flush, "mappedFileSizeCommitLog": str(1 << 30)})
    pid = next(b.proc.pid for b in ns._brokers if b.info.name == name)
    try:
        return _drive(ns.namesrv_addr, info.addr, pid, "official", scenario, seconds, threads)
    finally:
        ns.kill_broker(name)


def run_rmqwire(ns: _Namesrv, scenario: str, seconds: float, threads: int, parent: Path,
                profile: str | None, trace: str | None = None) -> Run:
    flush = SCENARIOS[scenario][1]
    workdir = Path(tempfile.mkdtemp(prefix="rmqwire-", dir=parent))
    broker = RmqwireBroker(ns.namesrv_addr, {"flushDiskType": flush, "mappedFileSizeCommitLog": str(1 << 30)},
                           workdir=workdir, name=f"rmqwire-{scenario}")
    if profile:
        broker.python_args = ["-m", "cProfile", "-o", profile]
    elif trace:
        broker.python_args = ["-m", "tools.bench.broker.sync_trace", str(Path(trace).resolve())]
    broker.start()
    try:
        return _drive(ns.namesrv_addr, broker.addr, broker.pid, "rmqwire", scenario, seconds, threads)
    finally:
        broker.stop(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)


def _row(run: Run) -> str:
    def f(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    return (f"{run.scenario:<8} {run.broker:<9} {run.tps:>9.0f} {f(run.mean_rt_ms, '>8.2f')} "
            f"{f(run.max_rt_ms, '>7d')} {run.send_failed:>6d} {f(run.cpu_s_per_million, '>9.1f')} "
            f"{f(run.rss_mib, '>8.1f')} {f(run.anon_mib, '>8.1f')}   load {run.load[0]:.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    ap.add_argument("--rmqwire-only", action="store_true", help="skip the official broker")
    ap.add_argument("--profile", help="cProfile output file for the rmqwire broker (one scenario)")
    ap.add_argument("--trace", help="file for the SYNC_FLUSH timeline of the rmqwire broker (sync_trace.py; "
                    "one scenario, printed at the end)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    ensure_benchmark_jars()
    parent = Path(tempfile.mkdtemp(prefix="rmqwire-bench-broker-"))
    ns = _Namesrv(workdir=parent).start()
    rows: list[dict[str, Any]] = []
    if not a.json:
        print(f"{'scenario':<8} {'broker':<9} {'msg/s':>9} {'mean RT':>8} {'max RT':>7} {'failed':>6} "
              f"{'CPU s/M':>9} {'RSS MiB':>8} {'anon MiB':>8}", flush=True)
    try:
        for index, scenario in enumerate(a.only or list(SCENARIOS)):
            official = None if a.rmqwire_only else run_official(ns, scenario, a.seconds, a.threads, index)
            ours = run_rmqwire(ns, scenario, a.seconds, a.threads, parent, a.profile, a.trace)
            ratio = ours.tps / official.tps if official and official.tps else None
            rows.append({"scenario": scenario, "official": asdict(official) if official else None,
                         "rmqwire": asdict(ours), "ratio": ratio})
            if not a.json:
                if official:
                    print(_row(official), flush=True)
                print(_row(ours) + (f"   ratio {ratio:.2f}" if ratio is not None else ""), flush=True)
    finally:
        ns.stop()
        shutil.rmtree(parent, ignore_errors=True)
    if a.trace and not a.json and Path(a.trace).exists():
        print(Path(a.trace).read_text(), end="")
    if a.json:
        print(json.dumps({"threads": a.threads, "seconds": a.seconds, "cpus": os.cpu_count(), "rows": rows}))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    raise SystemExit(main())
