"""Side-by-side consumer benchmark: drain a backlog from the official broker with rmqwire's
PushConsumer and PullConsumer and with the official Java consumers (5.3.3 DefaultMQPushConsumer
and DefaultLitePullConsumer), same machine, same run, same topic.

The backlog (default 1 M messages of 1 KiB, 8 queues) is written once by rmqwire's producer in
batches; each consumer then drains all of it from the first offset in its own group and its own
process (tools/bench/consumer/worker.py; ConsumerTool.java ``drain``), one after the other, pinned
to the same core when the OS allows. Printed per consumer: msg/s (start to last message),
process CPU seconds, CPU microseconds per message, and the ratio rmqwire/Java for msg/s and for
CPU per message (higher is better for rmqwire in both), with the load average around each run.

    python -m tools.bench.consumer [--count 1000000] [--namesrv ADDR --broker ADDR] [--json]

Without ``--namesrv`` an official 5.3.3 NameServer + Broker is started for the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tools.peers.java_consumer import JavaConsumerTool
from tools.peers.topics import create_topic

ROOT = Path(__file__).resolve().parents[3]

#: (name, rmqwire worker mode, Java drain mode)
PAIRS = [("push", "push", "push"), ("pull", "pull", "litepull")]


def _pin_prefix(core: int | None) -> list[str]:
    if core is None or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(core)]


def fill(namesrv: str, topic: str, count: int, body_size: int) -> float:
    """Write ``count`` messages in batches of 64 (rmqwire producer); seconds taken."""
    from rmqwire import Message, Producer
    from rmqwire.errors import BrokerResponseError, RemotingError

    body = b"x" * body_size
    t0 = time.perf_counter()
    with Producer(f"rmqwire_bench_fill_{os.getpid()}", namesrv_addr=namesrv,
                  compress_msg_body_over_howmuch=2**31 - 1) as p:
        sent = 0
        while sent < count:
            n = min(64, count - sent)
            try:
                p.send([Message(topic, body) for _ in range(n)])
            except (BrokerResponseError, RemotingError):
                time.sleep(0.2)  # a busy broker on a shared machine: try again
                continue
            sent += n
    return time.perf_counter() - t0


def run_rmqwire(namesrv: str, topic: str, mode: str, count: int, core: int | None) -> dict[str, Any]:
    cmd = [*_pin_prefix(core), sys.executable, "-m", "tools.bench.consumer.worker", "--namesrv", namesrv,
           "--topic", topic, "--group", f"rmqwire_bench_{mode}_{uuid.uuid4().hex[:6]}",
           "--count", str(count), "--mode", mode]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"rmqwire worker failed ({out.returncode}): {out.stdout[-500:]} {out.stderr[-2000:]}")
    r = json.loads(lines[-1])
    return {"msgsPerSec": r["msgsPerSec"], "seconds": r["seconds"], "cpuSeconds": r["cpuSeconds"],
            "received": r["received"]}


def run_java(tool: JavaConsumerTool, topic: str, mode: str, count: int, core: int | None) -> dict[str, Any]:
    args = ["drain", "--namesrv", tool.namesrv_addr, "--topic", topic, "--group",
            f"java_bench_{mode}_{uuid.uuid4().hex[:6]}", "--count", str(count), "--mode", mode]
    cmd = [*_pin_prefix(core), *tool.command(args)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tool.home, timeout=3600,
                         env=tool.environment())
    lines = [ln for ln in out.stdout.splitlines() if '"event":"done"' in ln or '"event":"timeout"' in ln]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"java drain failed ({out.returncode}): {out.stdout[-1000:]} {out.stderr[-2000:]}")
    r = json.loads(lines[-1])
    return {"msgsPerSec": r["msgsPerSec"], "seconds": r["seconds"], "cpuSeconds": r["cpuSeconds"],
            "received": r["received"]}


def _us_per_msg(r: dict[str, Any]) -> float:
    return r["cpuSeconds"] * 1e6 / r["received"] if r["received"] else 0.0


def _row(row: dict[str, Any]) -> str:
    ours, java = row["rmqwire"], row["java"]
    return (f"{row['consumer']:<5} rmqwire {ours['msgsPerSec']:>9.0f} msg/s {ours['cpuSeconds']:>7.1f} cpu-s "
            f"{_us_per_msg(ours):>6.1f} us/msg | java {java['msgsPerSec']:>9.0f} msg/s {java['cpuSeconds']:>7.1f} "
            f"cpu-s {_us_per_msg(java):>6.1f} us/msg | ratio msg/s {row['ratio']:.2f}x, "
            f"cpu/msg {row['cpu_ratio']:.2f}x | load {row['load_before'][0]:.1f}->{row['load_after'][0]:.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--namesrv")
    ap.add_argument("--broker", help="broker address (to create the topic); needed with --namesrv")
    ap.add_argument("--core", type=int, default=1, help="core the consumer processes are pinned to")
    ap.add_argument("--no-pin", action="store_true", help="let the consumers use every core")
    ap.add_argument("--only", nargs="*", choices=[p[0] for p in PAIRS])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    cluster = None
    if a.namesrv is None:
        from tools.reference.cluster import ReferenceCluster

        cluster = ReferenceCluster().start()
        namesrv, broker = cluster.namesrv_addr, cluster.broker_addr
    else:
        namesrv, broker = a.namesrv, a.broker
    pinnable = hasattr(os, "sched_setaffinity") and a.core < (os.cpu_count() or 1)
    core = None if a.no_pin or not pinnable else a.core
    rows: list[dict[str, Any]] = []
    try:
        topic = f"rmqwire_cbench_{uuid.uuid4().hex[:8]}"
        create_topic(broker, topic, queues=8, namesrv_addr=namesrv)
        fill_s = fill(namesrv, topic, a.count, a.body_size)
        if not a.json:
            pin = f"consumers pinned to core {core}" if core is not None else "consumers not pinned"
            print(f"backlog: {a.count} x {a.body_size} B in 8 queues, written in {fill_s:.1f} s; {pin}",
                  flush=True)
        with JavaConsumerTool(namesrv) as tool:
            for name, ours_mode, java_mode in PAIRS:
                if a.only and name not in a.only:
                    continue
                load0 = os.getloadavg()
                try:
                    ours = run_rmqwire(namesrv, topic, ours_mode, a.count, core)
                    java = run_java(tool, topic, java_mode, a.count, core)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    rows.append({"consumer": name, "error": str(e)[:500]})
                    if not a.json:
                        print(f"{name:<5} FAILED: {str(e)[:300]}", flush=True)
                    continue
                cpu_ratio = _us_per_msg(java) / _us_per_msg(ours) if _us_per_msg(ours) else 0.0
                rows.append({"consumer": name, "rmqwire": ours, "java": java,
                             "ratio": ours["msgsPerSec"] / java["msgsPerSec"] if java["msgsPerSec"] else 0.0,
                             "cpu_ratio": cpu_ratio, "load_before": load0,
                             "load_after": os.getloadavg()})
                if not a.json:
                    print(_row(rows[-1]), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    if a.json:
        print(json.dumps({"count": a.count, "body_size": a.body_size, "core": core, "rows": rows}, indent=2))
    return 0 if rows and all("error" not in r for r in rows) else 1
