"""What the broker's native metrics cost: send throughput with metrics off and on, the official
5.3.3 broker (``metricsExporterType=PROM``, OpenTelemetry) beside rmqwire's, in one run.

Each broker is started fresh per run under one official NameServer and loaded with the official
benchmark ``Producer`` (rocketmq-example: 1 KiB bodies, 16 threads, ASYNC_FLUSH, fixed duration;
tools/bench/broker's driver). With metrics on, the endpoint is scraped every second during the
run (Prometheus usually scrapes every 15 s: this is the worse case). Runs alternate off/on so that
the machine's drift hits both. Printed: stored msg/s, mean RT, broker CPU s per million messages,
then per broker the on/off throughput ratio, and rmqwire's own per-call cost of recording (ns per
put, per pull, per RPC answer) measured in-process.

    python -m tools.bench.metrics.broker [--seconds 30] [--threads 16] [--rounds 1] [--rmqwire-only]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
import time
import timeit
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tools.bench.broker.bench import Run, _drive, _Namesrv  # noqa: E402
from tools.reference.benchmark import ensure_benchmark_jars  # noqa: E402
from tools.reference.cluster import pick_ports  # noqa: E402
from tools.rmqwire_broker import RmqwireBroker  # noqa: E402

BASE = {"flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": str(1 << 30)}


def metrics_props(port: int) -> dict[str, str]:
    return {"metricsExporterType": "PROM", "metricsPromExporterPort": str(port),
            "metricsPromExporterHost": "127.0.0.1"}


class Scraper:
    """Scrapes ``url`` every second in a thread while a run lasts; counts scrapes and bytes."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.scrapes = 0
        self.errors = 0
        self.last_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.last_bytes = len(urllib.request.urlopen(self.url, timeout=10).read())
                self.scrapes += 1
            except OSError:
                self.errors += 1

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


def _mark(run: Run, on: bool) -> Run:
    """The driver's scenario field says whether metrics were on."""
    run.scenario = "on" if on else "off"
    return run


def run_official(ns: _Namesrv, on: bool, seconds: float, threads: int, index: int) -> tuple[Run, Scraper | None]:
    name = f"official-{'on' if on else 'off'}-{index}"
    port = pick_ports() if on else 0
    info = ns.add_broker(name, {**BASE, **(metrics_props(port) if on else {})})
    pid = next(b.proc.pid for b in ns._brokers if b.info.name == name)
    try:
        if not on:
            return _mark(_drive(ns.namesrv_addr, info.addr, pid, "official", "single", seconds, threads), on), None
        with Scraper(f"http://127.0.0.1:{port}/metrics") as scraper:
            run = _drive(ns.namesrv_addr, info.addr, pid, "official", "single", seconds, threads)
        return _mark(run, on), scraper
    finally:
        ns.kill_broker(name)


def run_rmqwire(ns: _Namesrv, on: bool, seconds: float, threads: int, parent: Path,
                index: int) -> tuple[Run, Scraper | None]:
    workdir = Path(tempfile.mkdtemp(prefix="rmqwire-", dir=parent))
    port = pick_ports() if on else 0
    broker = RmqwireBroker(ns.namesrv_addr, {**BASE, **(metrics_props(port) if on else {})}, workdir=workdir,
                           name=f"rmqwire-{'on' if on else 'off'}-{index}")
    broker.start()
    try:
        if not on:
            return _mark(_drive(ns.namesrv_addr, broker.addr, broker.pid, "rmqwire", "single", seconds, threads),
                         on), None
        with Scraper(f"http://127.0.0.1:{port}/metrics") as scraper:
            run = _drive(ns.namesrv_addr, broker.addr, broker.pid, "rmqwire", "single", seconds, threads)
        return _mark(run, on), scraper
    finally:
        broker.stop(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)


def recording_cost(n: int = 200_000) -> dict[str, float]:
    """ns per call of what the hot path does with metrics on (in this process, no broker)."""
    from rmqwire.codec import RemotingCommand, RequestCode, ResponseCode
    from rmqwire.remoting.metrics import RpcLatency
    from rmqwire.server.broker.metrics import BrokerMetrics, message_type

    m = BrokerMetrics.__new__(BrokerMetrics)  # only the recording state: no broker needed
    m._in, m._out = {}, {}
    rpc = RpcLatency()
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2)
    response = RemotingCommand(code=ResponseCode.SUCCESS)
    props = {"UNIQ_KEY": "x", "WAIT": "true", "TAGS": "TagA"}

    def put() -> None:
        m.on_put("BenchTopic", message_type(props), 1, 1200)

    def get() -> None:
        m.on_get("BenchTopic", "bench_group", 32, 38_400)

    def answer() -> None:
        t0 = time.perf_counter()
        rpc.record(request, response, time.perf_counter() - t0, False)

    def empty() -> None:
        pass

    from rmqwire.remoting.dispatcher import Dispatcher, RequestContext

    def answer_now(req: RemotingCommand, context: RequestContext) -> RemotingCommand:
        return req.response_to(ResponseCode.SUCCESS, None)

    plain, observed = Dispatcher({request.code: answer_now}), Dispatcher({request.code: answer_now})
    observed.observer = RpcLatency()
    context = RequestContext(peer="127.0.0.1:1")

    # the best of several repeats: the machine is shared, the least disturbed repeat is the cost
    return {name: min(timeit.repeat(fn, number=n // 10, repeat=10)) / (n // 10) * 1e9 for name, fn in
            (("an empty Python call (reference)", empty),
             ("put (message type + counters + size histogram)", put), ("pull (counters)", get),
             ("rpc answer (2 clock reads + histogram)", answer),
             ("dispatch of an answered request, metrics off", lambda: plain.dispatch(request, context)),
             ("dispatch of an answered request, metrics on", lambda: observed.dispatch(request, context)))}


def _row(run: Run, scraper: Scraper | None) -> str:
    scraped = f"{scraper.scrapes} scrapes of {scraper.last_bytes} B" if scraper else ""
    rt = "-" if run.mean_rt_ms is None else f"{run.mean_rt_ms:.2f}"
    cpu = "-" if run.cpu_s_per_million is None else f"{run.cpu_s_per_million:.1f}"
    return (f"{run.broker:<9} {run.scenario:<4} {run.tps:>9.0f} {rt:>8} {run.send_failed:>6d} {cpu:>9} "
            f"load {run.load[0]:>4.1f}  {scraped}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1, help="off/on pairs per broker")
    ap.add_argument("--rmqwire-only", action="store_true", help="skip the official broker")
    a = ap.parse_args(argv)
    ensure_benchmark_jars()
    parent = Path(tempfile.mkdtemp(prefix="rmqwire-bench-metrics-"))
    ns = _Namesrv(workdir=parent).start()
    results: dict[tuple[str, bool], list[float]] = {}
    cpu_off: list[float | None] = []  # rmqwire's CPU s per million messages (= us per message)
    print(f"official benchmark Producer, 1 KiB, {a.threads} threads, {a.seconds:.0f} s a run, ASYNC_FLUSH; "
          f"metrics on = metricsExporterType=PROM, scraped every 1 s")
    print(f"{'broker':<9} {'mtr':<4} {'msg/s':>9} {'mean RT':>8} {'failed':>6} {'CPU s/M':>9}", flush=True)
    try:
        for index in range(a.rounds):
            for on in ((False, True) if index % 2 == 0 else (True, False)):
                runs: list[tuple[Run, Scraper | None]] = []
                if not a.rmqwire_only:
                    runs.append(run_official(ns, on, a.seconds, a.threads, index))
                runs.append(run_rmqwire(ns, on, a.seconds, a.threads, parent, index))
                for run, scraper in runs:
                    results.setdefault((run.broker, on), []).append(run.tps)
                    if run.broker == "rmqwire" and not on:
                        cpu_off.append(run.cpu_s_per_million)
                    print(_row(run, scraper), flush=True)
    finally:
        ns.stop()
        shutil.rmtree(parent, ignore_errors=True)

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    ratios: dict[str, float] = {}
    for broker in ("official", "rmqwire"):
        off, on = mean(results.get((broker, False), [])), mean(results.get((broker, True), []))
        if off:
            ratios[broker] = on / off
            print(f"{broker}: metrics on / off = {on:.0f} / {off:.0f} msg/s = {on / off:.3f}")
    if "official" in ratios:
        print(f"ours/Java of that ratio: {ratios['rmqwire'] / ratios['official']:.3f}")
    costs = recording_cost()
    for name, ns_per_call in costs.items():
        print(f"rmqwire recording cost, {name}: {ns_per_call:.0f} ns")
    cpu = [r for r in cpu_off if r is not None]
    if cpu:
        per_message_ns = sum(v for k, v in costs.items() if k.startswith(("put", "rpc")))
        print(f"a single-message send records one put and one rpc answer: {per_message_ns:.0f} ns = "
              f"{per_message_ns / (mean(cpu) * 1000):.2%} of the broker's CPU per message with metrics off "
              f"({mean(cpu):.0f} us)")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    raise SystemExit(main())
