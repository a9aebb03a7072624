"""Spark reading RocketMQ through rmqwire.spark vs rmqwire's own PullConsumer, same backlog,
same run: 1 M messages of 1 KiB on 4 queues of the official 5.3.3 broker.

Printed per number of cores (1, then 2): rows/s of ``spark.read.format("rocketmq")...count()``
and of writing the same read to Parquet (Spark ``local[N]``, the driver, its JVM and Python
workers confined to those N cores), and msg/s of rmqwire's PullConsumer draining the backlog in
one process on the same cores; ratio = Spark / PullConsumer (goal: count >= 0.8x). Times exclude
JVM start (the worker warms the session up first); the load average is shown around each run.

    python -m tools.bench.spark [--count 1000000] [--cores 1 2] [--namesrv ADDR --broker ADDR] [--json]

Without ``--namesrv`` an official 5.3.3 NameServer + Broker is started for the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tools.bench.consumer.bench import fill, run_rmqwire
from tools.peers.topics import create_topic

ROOT = Path(__file__).resolve().parents[3]


def _cores(n: int) -> list[str]:
    """A taskset prefix confining a process tree to the last ``n`` cores (none if impossible)."""
    total = os.cpu_count() or 1
    if shutil.which("taskset") is None or n >= total:
        return []
    return ["taskset", "-c", ",".join(str(c) for c in range(total - n, total))]


def run_spark(namesrv: str, topic: str, cores: int, out: Path) -> dict[str, Any]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "spark" / "worker_site"),
                                                         os.environ.get("PYTHONPATH")])))
    cmd = [*_cores(cores), sys.executable, "-m", "tools.bench.spark.worker", "--namesrv", namesrv,
           "--topic", topic, "--master", f"local[{cores}]", "--output", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"spark worker failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--cores", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--namesrv")
    ap.add_argument("--broker", help="broker address (to create the topic); needed with --namesrv")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    cluster = None
    if a.namesrv is None:
        from tools.reference.cluster import ReferenceCluster

        cluster = ReferenceCluster().start()
        namesrv, broker = cluster.namesrv_addr, cluster.broker_addr
    else:
        namesrv, broker = a.namesrv, a.broker
    rows: list[dict[str, Any]] = []
    try:
        topic = f"rmqwire_sparkbench_{uuid.uuid4().hex[:8]}"
        create_topic(broker, topic, queues=4, namesrv_addr=namesrv)
        fill_s = fill(namesrv, topic, a.count, a.body_size)
        if not a.json:
            print(f"backlog: {a.count} x {a.body_size} B in 4 queues, written in {fill_s:.1f} s; "
                  f"{os.cpu_count()} cores on this machine", flush=True)
        with tempfile.TemporaryDirectory(prefix="rmqwire_sparkbench_") as tmp:
            for n in a.cores:
                load0 = os.getloadavg()
                core = (os.cpu_count() or 1) - 1 if n == 1 else None
                raw = run_rmqwire(namesrv, topic, "pull", a.count, core)
                sp = run_spark(namesrv, topic, n, Path(tmp) / f"out{n}")
                raw_rate = raw["received"] / raw["seconds"]
                row = {"cores": n, "pullConsumerMsgsPerSec": raw_rate,
                       "sparkCountRowsPerSec": sp["rows"] / sp["countSeconds"],
                       "sparkParquetRowsPerSec": sp["rows"] / sp["parquetSeconds"],
                       "rows": sp["rows"], "received": raw["received"],
                       "load_before": load0[0], "load_after": os.getloadavg()[0]}
                row["countRatio"] = row["sparkCountRowsPerSec"] / raw_rate
                row["parquetRatio"] = row["sparkParquetRowsPerSec"] / raw_rate
                rows.append(row)
                if not a.json:
                    print(f"{n} core(s): PullConsumer {raw_rate:>8.0f} msg/s | Spark count {row['sparkCountRowsPerSec']:>8.0f} "
                          f"rows/s ({row['countRatio']:.2f}x) | Spark -> Parquet {row['sparkParquetRowsPerSec']:>8.0f} "
                          f"rows/s ({row['parquetRatio']:.2f}x) | rows {sp['rows']} | load "
                          f"{row['load_before']:.1f}->{row['load_after']:.1f}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    if a.json:
        print(json.dumps({"count": a.count, "body_size": a.body_size, "rows": rows}, indent=2))
    return 0 if rows and all(r["rows"] == a.count for r in rows) else 1
