"""One rmqwire drain (the counterpart of ConsumerTool.java's ``drain``): consume a backlog from
the first offset until ``--count`` messages arrived; prints one JSON line.

    python -m tools.bench.consumer.worker --namesrv A --topic T --group G --count N --mode push|pull

push: the blocking PushConsumer (listener in the consume threads, Java's defaults: 20 threads,
batches of 1 message); pull: the blocking PullConsumer's poll loop. Time and CPU are counted from
start() to the last message; CPU is the process's (every thread).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from rmqwire import ConsumeFromWhere, ConsumeResult, PullConsumer, PushConsumer


def drain_push(a: argparse.Namespace) -> tuple[int, float, float]:
    done = threading.Event()
    lock = threading.Lock()
    count = [0]

    def listener(msgs: Any) -> ConsumeResult:
        with lock:
            count[0] += len(msgs)
            if count[0] >= a.count:
                done.set()
        return ConsumeResult.SUCCESS

    c = PushConsumer(a.group, namesrv_addr=a.namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                     consume_message_batch_max_size=a.batch)
    c.subscribe(a.topic, "*")
    c.register_listener(listener)
    t0, cpu0 = time.perf_counter(), time.process_time()
    c.start()
    done.wait(a.timeout)
    t1, cpu1 = time.perf_counter(), time.process_time()
    c.shutdown()
    return count[0], t1 - t0, cpu1 - cpu0


def drain_pull(a: argparse.Namespace) -> tuple[int, float, float]:
    got = 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    with PullConsumer(a.group, namesrv_addr=a.namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                      pull_batch_size=a.pull_batch) as pc:
        pc.subscribe(a.topic, "*")
        deadline = time.monotonic() + a.timeout
        while got < a.count and time.monotonic() < deadline:
            got += len(pc.poll(timeout=1.0))
        t1, cpu1 = time.perf_counter(), time.process_time()
    return got, t1 - t0, cpu1 - cpu0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--mode", choices=("push", "pull"), default="push")
    ap.add_argument("--batch", type=int, default=1, help="push: consume_message_batch_max_size")
    ap.add_argument("--pull-batch", type=int, default=10, help="pull: pull_batch_size")
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args(argv)
    received, seconds, cpu = (drain_push if a.mode == "push" else drain_pull)(a)
    print(json.dumps({"mode": a.mode, "received": received, "seconds": seconds,
                      "msgsPerSec": received / seconds if seconds else 0.0, "cpuSeconds": cpu}), flush=True)
    return 0 if received >= a.count else 3


if __name__ == "__main__":
    raise SystemExit(main())
