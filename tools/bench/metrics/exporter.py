"""What ``rmqwire exporter`` costs on a large cluster: collection cycle time, resident memory and
scrape latency with 1 000 topics x 100 consumer groups (rocketmq-exporter#144: the Java exporter's
one-minute cycle stops finishing at that size).

The cluster is rmqwire's own NameServer + Broker (``rmqwire standalone`` in a subprocess), or the
official 5.3.3 one with ``--official``. Set-up through the Admin API: ``--topics`` topics of 4 queues
with one message each, ``--groups`` subscription groups, each with committed offsets on
``--topics-per-group`` topics (so QUERY_TOPIC_CONSUME_BY_WHO and GET_CONSUME_STATS find them:
1 000 topic x group pairs by default). The exporter runs as ``python -m rmqwire exporter`` in a
subprocess; printed: the duration of each of ``--cycles`` cycles (from its own
``rmqwire_exporter_cycle_duration_seconds``), requests per cycle, series exported, its RSS
(``process_resident_memory_bytes``) and the latency of a full scrape (median and max of 20).
The Java exporter is not run beside it: it is a Spring Boot application built from source, which
the reference tooling does not have.

    python -m tools.bench.metrics.exporter [--topics 1000] [--groups 100] [--topics-per-group 10]
                                          [--cycles 3] [--official]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

ROOT = Path(__file__).resolve().parents[3]


def scrape(port: int) -> tuple[str, float]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120) as r:
        text = r.read().decode()
    return text, time.perf_counter() - t0


def value(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def populate(namesrv: str, broker_addr: str, topics: int, groups: int, per_group: int) -> None:
    from rmqwire import Admin, Message, Producer
    from rmqwire.codec.commands.admin import SubscriptionGroupConfig
    from rmqwire.codec.commands.topic import TopicConfig
    from rmqwire.model import MessageQueue

    names = [f"BenchExpT{i:04d}" for i in range(topics)]
    t0 = time.perf_counter()
    with Admin(namesrv, timeout=30) as admin:
        for t in names:
            admin.create_and_update_topic_config(
                broker_addr, TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4, perm=6))
        with Producer("BenchExpProducer", namesrv_addr=namesrv) as p:
            for t in names:
                p.send(Message(t, b"x"))
        broker_name = admin.examine_topic_route_info(names[0]).broker_datas[0].broker_name
        for g in range(groups):
            group = f"BenchExpG{g:03d}"
            admin.create_and_update_subscription_group_config(
                broker_addr, SubscriptionGroupConfig(group_name=group))
            for k in range(per_group):
                topic = names[(g * per_group + k) % topics]
                for q in range(4):
                    admin.update_consume_offset(broker_addr, group, MessageQueue(topic, broker_name, q), 0)
    print(f"set-up: {topics} topics, {groups} groups x {per_group} topics "
          f"({groups * per_group} pairs) in {time.perf_counter() - t0:.1f} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--topics-per-group", type=int, default=10)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--interval", type=float, default=60.0)
    ap.add_argument("--official", action="store_true", help="the official 5.3.3 cluster")
    args = ap.parse_args()

    from tests.conformance.prometheus_helpers import free_port

    work = Path(tempfile.mkdtemp(prefix="rmqwire-bench-exporter-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = cluster = exporter = None
    try:
        if args.official:
            from tools.reference.cluster import ReferenceCluster

            cluster = ReferenceCluster(version="5.3.3").start()
            namesrv, broker_addr, kind = cluster.namesrv_addr, cluster.broker_addr, "official 5.3.3"
        else:
            ns_port, broker_port = free_port(), free_port() + 2
            server = subprocess.Popen(
                [sys.executable, "-m", "rmqwire", "standalone", "--namesrv-port", str(ns_port),
                 "--broker-port", str(broker_port), "--store-dir", str(work / "store"),
                 "--log-level", "warn"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                text=True)
            for line in server.stdout:  # type: ignore[union-attr]
                if line.startswith("rmqwire standalone:"):
                    break
            namesrv, broker_addr = f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}"
            kind = "rmqwire standalone"
        populate(namesrv, broker_addr, args.topics, args.groups, args.topics_per_group)
        port = free_port()
        exporter = subprocess.Popen(
            [sys.executable, "-m", "rmqwire", "exporter", "-n", namesrv, "--host", "127.0.0.1",
             "--port", str(port), "--interval", str(args.interval), "--expire", "600",
             "--log-level", "warn"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        durations, requests = [], []
        seen = 0
        deadline = time.monotonic() + args.cycles * max(args.interval, 300) + 300
        while seen < args.cycles and time.monotonic() < deadline:
            time.sleep(1)
            try:
                text, _ = scrape(port)
            except OSError:
                continue
            n = int(value(text, "rmqwire_exporter_cycles_total") or 0)
            if n > seen:
                seen = n
                durations.append(value(text, "rmqwire_exporter_cycle_duration_seconds") or 0)
                requests.append(int(value(text, "rmqwire_exporter_requests") or 0))
                print(f"cycle {n}: {durations[-1]:.2f} s, {requests[-1]} requests, "
                      f"{int(value(text, 'rmqwire_exporter_series') or 0)} series", flush=True)
        latencies = sorted(scrape(port)[1] for _ in range(20))
        text, _ = scrape(port)
        rss = (value(text, "process_resident_memory_bytes") or 0) / 2 ** 20
        print(f"\nrmqwire exporter against {kind}: {args.topics} topics x {args.groups} groups "
              f"({args.groups * args.topics_per_group} topic/group pairs), interval {args.interval:g} s")
        print(f"  cycle time   median {statistics.median(durations):.2f} s, max {max(durations):.2f} s "
              f"({'within' if max(durations) < args.interval else 'OVER'} the interval); "
              f"{statistics.median(requests):.0f} requests a cycle")
        print(f"  RSS          {rss:.0f} MiB after {seen} cycles")
        print(f"  scrape       median {statistics.median(latencies) * 1000:.0f} ms, "
              f"max {latencies[-1] * 1000:.0f} ms ({len(text.encode()) / 2 ** 20:.1f} MiB exposition)")
        print(f"  machine load {os.getloadavg()[0]:.1f} (1 min)")
        return 0
    finally:
        for proc in (exporter, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
