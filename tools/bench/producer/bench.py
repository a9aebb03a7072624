"""Side-by-side producer benchmark: rmqwire vs the official Java client, one official broker.

For each scenario the rmqwire worker (tools/bench/producer/worker.py) and the Java tool
(tools/peers/java/producer/ProducerTool.java ``bench``, the official 5.3.3 client) run one after
the other against the same broker and topic, 1 KiB bodies, compression off, each client process
pinned to the same core when ``taskset``/sched_setaffinity allow. Printed: TPS, mean and p99
latency for both and the ratio rmqwire/Java, with the conditions (pinning, load average).

Neither client gets a warmer broker than the other: the broker is first warmed by an uncounted
run of each client in each send mode the chosen scenarios use (``--broker-warmup`` seconds each; a
fresh JVM broker is markedly slower until its JIT has compiled the paths a mode and a client's
requests take: a batch run on a broker warmed by Java async sends only was once 11k tps instead of
60k, and the first rmqwire async run after a Java-only warm-up 25k instead of 42k), and the client
that runs first alternates from scenario to scenario
(``first`` in each row; with ``--rounds N`` each scenario runs N times, the first client alternating
from round to round, and the median ratio is printed at the end: one run's ratio is within this
machine's run-to-run noise).

    python -m tools.bench.producer [--seconds 10] [--rounds 3] [--namesrv ADDR --broker ADDR] [--json]

Without ``--namesrv`` an official 5.3.3 NameServer + Broker is started for the run, and every thread
of both JVMs is pinned to the cores the clients do not use (``--broker-cores``): the layout of a
producer host apart from the broker's, where neither client shares its core with the broker.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tools.peers.java_producer import JavaProducerTool
from tools.peers.topics import create_topic

ROOT = Path(__file__).resolve().parents[3]

#: (name, mode, threads) as the issue lists them; core-async is the Twisted API without the
#: blocking layer (no Java counterpart of its own: compared with Java's async).
SCENARIOS = [
    ("sync x1", "sync", 1),
    ("sync x16", "sync", 16),
    ("async", "async", 1),
    ("core-async", "core-async", 1),
    ("batch16", "batch", 1),
    ("oneway", "oneway", 1),
]
JAVA_MODE = {"core-async": "async"}


def _pin_prefix(core: int | None) -> list[str]:
    if core is None or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(core)]


def _pin_threads(pids: list[int], cores: set[int]) -> None:
    """Pin every thread of each process (a JVM's threads created later inherit it)."""
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(tid), cores)
            except OSError:  # a thread that has just ended
                pass


def _broker_cores(spec: str, client_core: int | None) -> set[int] | None:
    if spec == "none" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = os.cpu_count() or 1
    if spec == "auto":
        rest = {c for c in range(cpus) if c != client_core}
        return rest if client_core is not None and rest else None
    cores = {int(c) for c in spec.split(",")}
    if not cores or not cores <= set(range(cpus)):
        raise SystemExit(f"--broker-cores {spec!r}: cores must be in 0..{cpus - 1}")
    return cores


def run_rmqwire(namesrv: str, topic: str, mode: str, threads: int, seconds: float, core: int | None,
                inflight: int, gc_gen0: int = 0) -> dict[str, Any]:
    cmd = [*_pin_prefix(core), sys.executable, "-m", "tools.bench.producer.worker", "--namesrv", namesrv,
           "--topic", topic, "--mode", mode, "--threads", str(threads), "--seconds", str(seconds),
           "--inflight", str(inflight), "--gc-gen0", str(gc_gen0)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=seconds + 180)
    if out.returncode != 0:
        raise RuntimeError(f"rmqwire worker failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_java(tool: JavaProducerTool, topic: str, mode: str, threads: int, seconds: float,
             core: int | None, inflight: int) -> dict[str, Any]:
    args = ["bench", "--namesrv", tool.namesrv_addr, "--topic", topic, "--mode", mode,
            "--threads", str(threads), "--seconds", str(int(seconds)), "--inflight", str(inflight)]
    cmd = [*_pin_prefix(core), *tool.command(args)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tool.home, timeout=seconds + 180,
                         env=tool.environment())
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{") and '"mode"' in ln]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"java bench failed ({out.returncode}): {out.stdout[-1000:]} {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--namesrv")
    ap.add_argument("--broker", help="broker address (to create the topic); needed with --namesrv")
    ap.add_argument("--core", type=int, default=1, help="core the client processes are pinned to")
    ap.add_argument("--inflight", type=int, default=1024, help="async window (both clients)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of each scenario (first client alternating); the median ratio is printed")
    ap.add_argument("--broker-cores", default="auto",
                    help="cores the started NameServer + Broker are pinned to: auto (all but --core), "
                         "a list like 0, or none")
    ap.add_argument("--only", nargs="*", help="scenario names to run (default: all)")
    ap.add_argument("--broker-warmup", type=int, default=8,
                    help="seconds of uncounted Java sends per send mode before the first scenario")
    ap.add_argument("--gc-gen0", type=int, default=0,
                    help="the rmqwire worker opts in to rmqwire.tuning.tune_gc(N) (0: off)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    core = a.core if hasattr(os, "sched_setaffinity") and a.core < (os.cpu_count() or 1) else None
    broker_cores = _broker_cores(a.broker_cores, core) if a.namesrv is None else None
    cluster = None
    if a.namesrv is None:
        from tools.reference.cluster import ReferenceCluster

        cluster = ReferenceCluster().start()
        namesrv, broker = cluster.namesrv_addr, cluster.broker_addr
        if broker_cores is not None:
            _pin_threads(cluster.pids, broker_cores)
    else:
        namesrv, broker = a.namesrv, a.broker
    rows = []
    try:
        topic = f"rmqwire_bench_{uuid.uuid4().hex[:8]}"
        create_topic(broker, topic, queues=8, namesrv_addr=namesrv)
        with JavaProducerTool(namesrv) as tool:
            chosen = [s for s in SCENARIOS if not a.only or s[0] in a.only]
            if a.broker_warmup > 0:
                for mode in dict.fromkeys(JAVA_MODE.get(m, m) for _, m, _ in chosen):
                    threads = 16 if mode == "sync" else 1
                    run_java(tool, topic, mode, threads, a.broker_warmup, core, a.inflight)
                    run_rmqwire(namesrv, topic, mode, threads, a.broker_warmup, core, a.inflight)
            runs = [(r, i, s) for r in range(a.rounds) for i, s in enumerate(chosen)]
            for r, i, (name, mode, threads) in runs:
                load0 = os.getloadavg()
                java_first = (i + r) % 2 == 1
                java_args = (tool, topic, JAVA_MODE.get(mode, mode), threads, a.seconds, core, a.inflight)
                try:
                    java = run_java(*java_args) if java_first else None
                    ours = run_rmqwire(namesrv, topic, mode, threads, a.seconds, core, a.inflight,
                                       a.gc_gen0)
                    if java is None:
                        java = run_java(*java_args)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    # one broken run (an overloaded shared machine) must not lose the others
                    rows.append({"scenario": name, "error": str(e)[:500]})
                    if not a.json:
                        print(f"{name:<11} FAILED: {str(e)[:300]}", flush=True)
                    continue
                rows.append({"scenario": name, "first": "java" if java_first else "rmqwire",
                             "rmqwire": ours, "java": java,
                             "ratio": ours["tps"] / java["tps"] if java["tps"] else None,
                             "load_before": load0, "load_after": os.getloadavg()})
                if not a.json:
                    print(_row(rows[-1]), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    conditions = {"cpus": os.cpu_count(), "pinned_core": core,
                  "broker_cores": sorted(broker_cores) if broker_cores is not None else None,
                  "rounds": a.rounds, "python": platform.python_version(),
                  "seconds": a.seconds, "body_bytes": 1024, "async_window": a.inflight,
                  "broker_warmup_s": a.broker_warmup, "rmqwire_gc_gen0": a.gc_gen0 or None,
                  "load_avg_end": os.getloadavg()}
    summary = _medians(rows)
    if a.json:
        print(json.dumps({"conditions": conditions, "rows": rows, "summary": summary}))
    else:
        if a.rounds > 1:
            for m in summary:
                print(_median_row(m))
        print(f"conditions: {conditions}")
    return 0


def _medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario, over its completed rounds: median tps of each client and median ratio."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("ratio") is not None:
            by.setdefault(r["scenario"], []).append(r)
    return [{"scenario": name, "rounds": len(rs),
             "rmqwire_tps": statistics.median(r["rmqwire"]["tps"] for r in rs),
             "java_tps": statistics.median(r["java"]["tps"] for r in rs),
             "ratio": statistics.median(r["ratio"] for r in rs),
             "ratios": [round(r["ratio"], 3) for r in rs]}
            for name, rs in by.items()]


def _median_row(m: dict[str, Any]) -> str:
    ratios = ", ".join(f"{x:.2f}" for x in m["ratios"])
    return (f"{m['scenario']:<11} median of {m['rounds']}: rmqwire {m['rmqwire_tps']:>7.0f} tps"
            f" | java {m['java_tps']:>7.0f} tps | ratio {m['ratio']:.2f}  (rounds: {ratios})")


def _row(r: dict[str, Any]) -> str:
    o, j = r["rmqwire"], r["java"]
    ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
    return (f"{r['scenario']:<11} rmqwire {o['tps']:>7.0f} tps  mean {o['meanMs']:6.2f} ms  p99 {o['p99Ms']:7.2f} ms"
            f"  cpu {o['cpuUsPerMsg']:5.0f} us/msg"
            f" | java {j['tps']:>7.0f} tps  mean {j['meanMs']:6.2f} ms  p99 {j['p99Ms']:7.2f} ms"
            f"  cpu {j['cpuUsPerMsg']:5.0f} us/msg"
            f" | ratio {ratio}  ({r['first']} first, load {r['load_before'][0]:.1f}->{r['load_after'][0]:.1f}, failed "
            f"{o['failed']}/{j['failed']})")
