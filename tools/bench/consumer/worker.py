"""One rmqwire drain (the counterpart of ConsumerTool.java's ``drain``): consume a backlog from
the first offset until ``--count`` messages arrived; prints one JSON line.

    python -m tools.bench.consumer.worker --namesrv A --topic T --group G --count N --mode push|pull

push: the blocking PushConsumer (listener in the consume threads, Java's defaults: 20 threads,
batches of 1 message); pull: the blocking PullConsumer's poll loop. Time and CPU are counted from
start() to the last message; CPU is the process's (every thread).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from rmqwire import ConsumeFromWhere, ConsumeResult, PullConsumer, PushConsumer


class PullTrace:
    """``--trace``: where a push consumer's pull loop spends wall time, per queue and pull: the
    round trip (pull sent -> the read that completed its answer), the wait from that read to the
    answer's callback, and from that read to the queue's next pull sent. Patches the classes."""

    def __init__(self) -> None:
        from rmqwire.client.consumer.pull import PullAPIWrapper
        from rmqwire.client.consumer.push_consumer import PushConsumer
        from rmqwire.remoting.protocol import RemotingProtocol

        self.events: dict[Any, list[tuple[str, float, float]]] = {}
        self.last_read = 0.0
        clock = time.perf_counter
        trace = self
        received, kernel, arrived = RemotingProtocol.dataReceived, PullAPIWrapper.pull_kernel, PushConsumer._arrived

        def data_received(proto: Any, data: bytes) -> None:
            trace.last_read = clock()
            received(proto, data)

        def pull_kernel(wrapper: Any, mq: Any, *args: Any) -> Any:
            trace.events.setdefault(mq, []).append(("s", clock(), 0.0))
            return kernel(wrapper, mq, *args)

        def on_arrived(consumer: Any, raw: Any, req: Any, *args: Any) -> None:
            trace.events.setdefault(req.message_queue, []).append(("a", trace.last_read, clock()))
            arrived(consumer, raw, req, *args)

        # the cyclic GC's pauses (any thread), per generation
        self.gc_seconds = [0.0, 0.0, 0.0]
        self.gc_counts = [0, 0, 0]
        started = [0.0]

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                started[0] = clock()
            else:
                self.gc_seconds[info["generation"]] += clock() - started[0]
                self.gc_counts[info["generation"]] += 1

        gc.callbacks.append(on_gc)
        RemotingProtocol.dataReceived = data_received  # type: ignore[method-assign]
        PullAPIWrapper.pull_kernel = pull_kernel  # type: ignore[method-assign]
        PushConsumer._arrived = on_arrived  # type: ignore[method-assign]

    def summary(self) -> dict[str, Any]:
        rtt, to_cb, to_next = [], [], []
        for evs in self.events.values():
            sent = read = None
            for kind, t, t_cb in evs:
                if kind == "s":
                    if read is not None:
                        to_next.append(t - read)
                    sent, read = t, None
                else:
                    if sent is not None:
                        rtt.append(t - sent)
                    to_cb.append(t_cb - t)
                    sent, read = None, t

        def stats(xs: list[float]) -> dict[str, float]:
            if not xs:
                return {}
            xs.sort()
            return {"n": len(xs), "mean_us": sum(xs) / len(xs) * 1e6, "p50_us": xs[len(xs) // 2] * 1e6,
                    "p90_us": xs[len(xs) * 9 // 10] * 1e6}

        return {"pull_rtt": stats(rtt), "read_to_callback": stats(to_cb), "read_to_next_pull": stats(to_next),
                "gc_ms": [round(t * 1000, 1) for t in self.gc_seconds], "gc_counts": self.gc_counts}


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
    ap.add_argument("--trace", action="store_true", help="push: pull round trips and waits (PullTrace)")
    a = ap.parse_args(argv)
    trace = PullTrace() if a.trace and a.mode == "push" else None
    received, seconds, cpu = (drain_push if a.mode == "push" else drain_pull)(a)
    out = {"mode": a.mode, "received": received, "seconds": seconds,
           "msgsPerSec": received / seconds if seconds else 0.0, "cpuSeconds": cpu}
    if trace is not None:
        out["trace"] = trace.summary()
    print(json.dumps(out), flush=True)
    return 0 if received >= a.count else 3


if __name__ == "__main__":
    raise SystemExit(main())
