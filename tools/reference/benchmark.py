"""The official benchmark Producer/Consumer (``org.apache.rocketmq:rocketmq-example``) as a peer.

Maven Central has rocketmq-example only for 4.1.0-incubating..4.7.0 and 5.5.0, not for the server
versions we run: ``.../rocketmq-example/5.3.3/rocketmq-example-5.3.3.jar`` is a 404 (and so is
4.9.7; the matching benchmark ships only in the binary release zip, which we do not use). So the
benchmark runs from its own classpath, rocketmq-example 5.5.0 with its 5.5.0 client, against any
server; it speaks the same remoting protocol. If even that cannot be resolved, ReferenceUnavailable
carries the evidence. The benchmark code itself is the official jar, unmodified.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.reference import jars
from tools.reference.cluster import JvmProcess, run_to_end, spawn
from tools.reference.jars import ReferenceUnavailable

BENCHMARK_PRODUCER = "org.apache.rocketmq.example.benchmark.Producer"
BENCHMARK_CONSUMER = "org.apache.rocketmq.example.benchmark.Consumer"
EXAMPLE_VERSION = "5.5.0"
POM = Path(__file__).resolve().parent / "benchmark-pom.xml"
CLIENT_HEAP = ("-Xms256m", "-Xmx256m")

EVIDENCE = (
    "org.apache.rocketmq:rocketmq-example is not on Maven Central for the server versions "
    "(GET https://repo.maven.apache.org/maven2/org/apache/rocketmq/rocketmq-example/5.3.3/"
    "rocketmq-example-5.3.3.jar -> 404; its maven-metadata.xml lists only 4.1.0-incubating..4.7.0 "
    f"and 5.5.0), so the benchmark comes from rocketmq-example {EXAMPLE_VERSION}"
)


def benchmark_lib_dir(example_version: str = EXAMPLE_VERSION) -> Path:
    return jars.CACHE_ROOT / "rocketmq" / f"example-{example_version}" / "lib"


def ensure_benchmark_jars(example_version: str = EXAMPLE_VERSION) -> Path:
    try:
        return jars.resolve_pom(POM, benchmark_lib_dir(example_version), {"example.version": example_version},
                                f"rocketmq-example {example_version}", "rocketmq-example-*.jar")
    except ReferenceUnavailable as exc:
        raise ReferenceUnavailable(f"official benchmark unavailable: {exc}\n{EVIDENCE}") from exc


@dataclass(frozen=True, slots=True)
class BenchmarkRun:
    args: tuple[str, ...]
    output: str          # stdout and stderr interleaved, as the tool prints its reports
    returncode: int
    elapsed_s: float
    timed_out: bool


def _command(main: str, args: tuple[str, ...], user_home: Path, example_version: str) -> list[str]:
    lib = ensure_benchmark_jars(example_version)
    return [jars.java_bin(), *CLIENT_HEAP, f"-Duser.home={user_home}",
            "-Drmq.logback.configurationFile=rmq.client.logback.xml", "-cp", f"{lib}/*", main, *args]


def _run(main: str, namesrv_addr: str, args: tuple[str, ...], timeout: float, stop_after: float | None,
         example_version: str) -> BenchmarkRun:
    argv = ("-n", namesrv_addr, *args)   # always -n: without it the client asks jmenv.tbsite.net over HTTP
    work = Path(tempfile.mkdtemp(prefix="rmqwire-bench-"))
    try:
        cmd = _command(main, argv, work, example_version)
        # The Consumer never exits by itself; its shutdown hook stops it on SIGTERM.
        run = run_to_end(cmd, cwd=work, env=None, timeout=stop_after if stop_after is not None else timeout,
                         term_grace=15, merge_stderr=True)
        return BenchmarkRun(argv, run.stdout.decode(errors="replace"), run.returncode, run.elapsed_s,
                            run.stopped and stop_after is None)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_producer(namesrv_addr: str, *args: str, timeout: float = 300.0,
                 example_version: str = EXAMPLE_VERSION) -> BenchmarkRun:
    """Official benchmark Producer; pass ``-q N`` so that it ends (e.g. ``-t T -w 4 -s 128 -q 20000``)."""
    return _run(BENCHMARK_PRODUCER, namesrv_addr, args, timeout, None, example_version)


def run_consumer(namesrv_addr: str, *args: str, duration: float = 30.0,
                 example_version: str = EXAMPLE_VERSION) -> BenchmarkRun:
    """Official benchmark Consumer for ``duration`` seconds, then SIGTERM (it never ends by itself)."""
    return _run(BENCHMARK_CONSUMER, namesrv_addr, args, duration, duration, example_version)


@dataclass
class RunningConsumer:
    """The official benchmark Consumer running in the background (see start_consumer)."""

    args: tuple[str, ...]
    process: JvmProcess

    def output(self) -> str:
        return self.process.stdout_text()

    def alive(self) -> bool:
        return self.process.alive()

    def reports(self) -> list[ConsumerReport]:
        return parse_consumer_reports(self.output())


@contextmanager
def start_consumer(namesrv_addr: str, *args: str,
                   example_version: str = EXAMPLE_VERSION) -> Iterator[RunningConsumer]:
    """Official benchmark Consumer in the background, so that the caller can wait on a condition
    (e.g. the group's committed offsets) instead of a fixed window; stopped with SIGTERM (its
    shutdown hook persists offsets), then SIGKILL, when the block ends, however it ends."""
    argv = ("-n", namesrv_addr, *args)   # always -n: without it the client asks jmenv.tbsite.net over HTTP
    work = Path(tempfile.mkdtemp(prefix="rmqwire-bench-"))
    proc: JvmProcess | None = None
    try:
        cmd = _command(BENCHMARK_CONSUMER, argv, work, example_version)
        home = work / "home"
        home.mkdir()
        proc = spawn("benchmark-consumer", cmd, home, work, work)
        yield RunningConsumer(argv, proc)
    finally:
        if proc is not None:
            proc.terminate(timeout=15)
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class ProducerSummary:
    send_total: int
    send_tps: int | None          # absent when the run was shorter than the tool's 1 s snapshot window
    max_rt_ms: int | None
    avg_rt_ms: float | None
    send_failed: int
    response_failed: int


_COMPLETE = re.compile(
    r"\[Complete\] Send Total: (?P<total>\d+)"
    r"(?: \| Send TPS: (?P<tps>\d+) \| Max RT\(ms\): (?P<max>\d+) \| Average RT\(ms\):\s*(?P<avg>[\d.]+))?"
    r"\s*\|?\s*Send Failed: (?P<failed>\d+)\s*\|?\s*Response Failed: (?P<rfailed>\d+)")


def parse_producer_summary(output: str) -> ProducerSummary:
    m = _COMPLETE.search(output)
    if m is None:
        raise ValueError(f"no [Complete] line in benchmark Producer output: {output[-1000:]!r}")
    return ProducerSummary(
        int(m["total"]), int(m["tps"]) if m["tps"] else None, int(m["max"]) if m["max"] else None,
        float(m["avg"]) if m["avg"] else None, int(m["failed"]), int(m["rfailed"]))


@dataclass(frozen=True, slots=True)
class ConsumerReport:
    consume_tps: int
    avg_b2c_rt_ms: float | None   # NaN in the tool's output when nothing was consumed
    avg_s2c_rt_ms: float | None
    consume_fail: int


_CONSUMER = re.compile(
    r"Consume TPS: (?P<tps>\d+) \| AVG\(B2C\) RT\(ms\):\s*(?P<b2c>[\d.]+|NaN) \| "
    r"AVG\(S2C\) RT\(ms\):\s*(?P<s2c>[\d.]+|NaN) \|.*?Consume Fail: (?P<fail>\d+)")


def parse_consumer_reports(output: str) -> list[ConsumerReport]:
    def num(s: str) -> float | None:
        return None if s == "NaN" else float(s)

    return [ConsumerReport(int(m["tps"]), num(m["b2c"]), num(m["s2c"]), int(m["fail"]))
            for m in _CONSUMER.finditer(output)]
