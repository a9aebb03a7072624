"""The official benchmark Producer/Consumer (``rocketmq-example``) cannot be run from Maven Central.

``org.apache.rocketmq:rocketmq-example`` is not deployed to Central for the versions we run (5.3.3,
4.9.7; Central has it only for 4.1.0-incubating..4.7.0 and 5.5.0); the jar exists only inside the
binary distribution zip on dist.apache.org. rmqwire does not
fetch that zip nor re-create the official benchmark code, so every entry point here raises
ReferenceUnavailable with the evidence; callers skip (or fail in CI) on it like on a missing JDK.
"""

from __future__ import annotations

from tools.reference import jars
from tools.reference.jars import ReferenceUnavailable

BENCHMARK_PRODUCER = "org.apache.rocketmq.example.benchmark.Producer"
BENCHMARK_CONSUMER = "org.apache.rocketmq.example.benchmark.Consumer"

EVIDENCE = (
    "org.apache.rocketmq:rocketmq-example is not on Maven Central for the reference versions: "
    "GET https://repo.maven.apache.org/maven2/org/apache/rocketmq/rocketmq-example/5.3.3/"
    "rocketmq-example-5.3.3.jar -> 404 (mvn: could not find artifact in central); its maven-metadata.xml "
    "lists only 4.1.0-incubating..4.7.0 and 5.5.0. The official benchmark "
    f"{BENCHMARK_PRODUCER} / {BENCHMARK_CONSUMER} for 5.3.3 / 4.9.7 ships only in the binary release zip, "
    "which the reference harness does not use"
)


def benchmark_available(version: str = jars.DEFAULT_VERSION) -> bool:
    """True only if a resolved lib dir already holds rocketmq-example (never the case from Central)."""
    return any(jars.lib_dir(version).glob("rocketmq-example-*.jar"))


def run_producer(namesrv_addr: str, *args: str, version: str = jars.DEFAULT_VERSION,
                 timeout: float = 300.0) -> str:
    """Official benchmark Producer; unavailable (see EVIDENCE)."""
    raise ReferenceUnavailable(f"official benchmark Producer unavailable: {EVIDENCE}")


def run_consumer(namesrv_addr: str, *args: str, version: str = jars.DEFAULT_VERSION,
                 timeout: float = 300.0) -> str:
    """Official benchmark Consumer; unavailable (see EVIDENCE)."""
    raise ReferenceUnavailable(f"official benchmark Consumer unavailable: {EVIDENCE}")
