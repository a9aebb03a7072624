"""One rmqwire load run (the counterpart of ProducerTool.java's ``bench``): prints one JSON line.

    python -m tools.bench.producer.worker --namesrv A --topic T --mode sync --threads 16 --seconds 10

Modes: sync, batch, oneway (blocking Producer, ``--threads`` callers), async (blocking
``send_async`` with at most ``--inflight`` pending), core-async (the Twisted core driven from the
reactor thread, same window). Latency = call to result; the first ``--warmup`` seconds are not
counted. ``--gc-gen0 N``: the application opts in to ``rmqwire.tuning.tune_gc(N)``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from twisted.python.failure import Failure

from rmqwire import Message, Producer
from rmqwire.client import blocking
from rmqwire.tuning import tune_gc

#: free window slots that wake a sender blocked on a full async window
REFILL = 64


def _summary(mode: str, threads: int, seconds: float, sent: int, lat: list[float], failed: int,
             cpu_s: float) -> dict[str, Any]:
    lat.sort()
    n = len(lat)
    mean = sum(lat) / n * 1000 if n else 0.0
    p99 = lat[min(n - 1, max(0, -(-n * 99 // 100) - 1))] * 1000 if n else 0.0
    return {"mode": mode, "threads": threads, "messages": sent, "seconds": seconds,
            "tps": sent / seconds, "meanMs": mean, "p99Ms": p99, "failed": failed,
            "cpuUsPerMsg": cpu_s * 1e6 / sent if sent else 0.0}


def run(a: argparse.Namespace) -> dict[str, Any]:
    body = b"x" * a.body_size
    lat: list[float] = []
    lock = threading.Lock()
    counts = {"sent": 0, "failed": 0}
    with Producer(f"rmqwire_bench_{a.mode}", namesrv_addr=a.namesrv,
                  compress_msg_body_over_howmuch=2**31 - 1,
                  instance_name=f"bench_{a.mode}_{os.getpid()}") as p:
        p.send(Message(a.topic, body))  # route and connection ready before timing
        if a.gc_gen0:
            tune_gc(a.gc_gen0)  # the application's opt-in (rmqwire.tuning), for the whole run
        warm_end = time.perf_counter() + a.warmup
        end = warm_end + a.seconds
        cpu = [0.0, 0.0]  # process CPU (every thread) at the start and end of the counted window

        def cpu_clock() -> None:
            time.sleep(max(0.0, warm_end - time.perf_counter()))
            cpu[0] = time.process_time()
            time.sleep(max(0.0, end - time.perf_counter()))
            cpu[1] = time.process_time()

        clock = threading.Thread(target=cpu_clock, daemon=True)
        clock.start()

        def record(t0: float, t1: float, n: int) -> None:
            if t0 >= warm_end and t1 <= end:
                with lock:
                    lat.append(t1 - t0)
                    counts["sent"] += n

        if a.mode in ("async", "core-async"):
            done = threading.Event()
            outstanding = [0]
            room = threading.Condition()

            # The sender is woken once REFILL slots are free, not per slot, so the two threads do
            # not hand the GIL over per message. Not at half the window: the window then averaged
            # ~75 % full (Little's law) and the broker was left with less to do than Java's
            # per-message semaphore gives it (gap 512 vs 64: 39-41k vs 43-44k tps, same broker).
            wake_at = a.inflight - min(REFILL, max(1, a.inflight // 2))

            def finished(t0: float, f: Any) -> None:
                # a done-callback: runs in the reactor thread
                t1 = time.perf_counter()
                if f.exception() is None:
                    record(t0, t1, 1)
                else:
                    with lock:
                        counts["failed"] += 1
                with room:
                    outstanding[0] -= 1
                    if outstanding[0] <= wake_at:
                        room.notify()

            if a.mode == "async":
                while time.perf_counter() < end:
                    with room:
                        while outstanding[0] >= a.inflight:
                            room.wait()
                        outstanding[0] += 1
                    t0 = time.perf_counter()
                    p.send_async(Message(a.topic, body)).add_done_callback(
                        lambda f, t0=t0: finished(t0, f))
                with room:
                    room.wait_for(lambda: outstanding[0] == 0, timeout=60)
            else:
                core = p.core
                reactor = blocking.ensure_reactor()

                def pump() -> None:
                    # runs in the reactor thread: keep `inflight` sends going until the end
                    while outstanding[0] < a.inflight:
                        t0 = time.perf_counter()
                        if t0 >= end:
                            if outstanding[0] == 0:
                                done.set()
                            return
                        outstanding[0] += 1
                        d = core.send_async(Message(a.topic, body))
                        d.addBoth(lambda r, t0=t0: settle(t0, r))

                def settle(t0: float, result: Any) -> None:
                    t1 = time.perf_counter()
                    outstanding[0] -= 1
                    if isinstance(result, Failure):
                        with lock:
                            counts["failed"] += 1
                    else:
                        record(t0, t1, 1)
                    pump()

                reactor.callFromThread(pump)
                done.wait(a.seconds + a.warmup + 60)
        else:
            def worker() -> None:
                while True:
                    t0 = time.perf_counter()
                    if t0 >= end:
                        return
                    try:
                        if a.mode == "sync":
                            p.send(Message(a.topic, body))
                            n = 1
                        elif a.mode == "batch":
                            p.send([Message(a.topic, body) for _ in range(a.batch)])
                            n = a.batch
                        else:
                            p.send_oneway(Message(a.topic, body))
                            n = 1
                    except Exception:
                        with lock:
                            counts["failed"] += 1
                        continue
                    record(t0, time.perf_counter(), n)

            workers = [threading.Thread(target=worker) for _ in range(a.threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        clock.join()
    return _summary(a.mode, a.threads, a.seconds, counts["sent"], lat, counts["failed"], cpu[1] - cpu[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--mode", required=True, choices=["sync", "batch", "oneway", "async", "core-async"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--inflight", type=int, default=1024)
    ap.add_argument("--gc-gen0", type=int, default=0,
                    help="rmqwire.tuning.tune_gc(N) once the producer is started (0: the "
                         "interpreter's collector as it is)")
    ap.add_argument("--profile", help="write a cProfile of the caller's thread here and one of "
                                      "the reactor thread to <path>.reactor")
    a = ap.parse_args(argv)
    if a.profile:
        import cProfile

        # cProfile sees only the thread that enables it: one profile for the caller's thread,
        # one enabled inside the reactor thread (written to <path>.reactor)
        prof, rprof = cProfile.Profile(), cProfile.Profile()
        blocking.call(rprof.enable, timeout=30)
        result = prof.runcall(run, a)
        blocking.call(rprof.disable, timeout=30)
        prof.dump_stats(a.profile)
        rprof.dump_stats(a.profile + ".reactor")
    else:
        result = run(a)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
