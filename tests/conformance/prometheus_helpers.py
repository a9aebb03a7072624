"""A real Prometheus for the tests: Debian's ``prometheus`` package, started on loopback.

Usage: tests/conformance/conftest.py imports the fixtures ``prometheus`` (function scope) and
``prometheus_module`` (module scope); elsewhere import them from this module. Each is a factory;
every server it started is killed at teardown::

    from tests.conformance.prometheus_helpers import ScrapeTarget

    def test_scraped(prometheus, rmqwire_cluster):
        prom = prometheus([ScrapeTarget("127.0.0.1:5557", labels={"Env": "test"})],
                          rule_files=["grafana/alerts.yml"])        # optional
        prom.wait_targets_up()                      # every target scraped once, health "up"
        series = prom.wait_for_series("rocketmq_broker_tps")        # instant query until non-empty
        assert series[0]["metric"]["broker"] == "broker-a"
        prom.wait_for_alert("RocketMQConsumerBacklogGrowing", state="firing")

``Prometheus.query(expr)`` returns the instant-query result list (``[{"metric": {...}, "value":
[ts, "v"]}, ...]``); ``alerts()`` the active alerts; ``targets()`` the active targets;
``reload(targets=..., rule_files=...)`` rewrites the config and reloads it (``/-/reload``).
``promtool(*args)`` runs Debian's promtool (``check rules FILE``, ``check metrics`` with ``input=``).

The server scrapes and evaluates every ``interval`` seconds (1 s by default, so tests wait little),
keeps its TSDB in a temporary directory and listens on a free loopback port. A missing binary fails
the test with how to get it (scripts/setup.sh installs the package); it is never skipped.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

STARTUP_TIMEOUT = 60.0
#: Generous: the machine runs other engineers' JVMs at the same time.
DEFAULT_WAIT = 90.0


@dataclass(frozen=True)
class ScrapeTarget:
    """One scrape job: ``address`` is ``host:port``; ``labels`` are static target labels
    (rocketmq-exporter's dashboard 2 wants ``Env`` and ``Cluster``)."""

    address: str
    path: str = "/metrics"
    job: str = "rmqwire"
    labels: dict[str, str] = field(default_factory=dict)


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: scripts/setup.sh installs Debian's prometheus "
                    f"package (apt-get install prometheus)", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def promtool(*args: str, input: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run promtool; the caller asserts on ``returncode`` / ``stdout`` / ``stderr``."""
    return subprocess.run([binary("promtool"), *args], input=input, capture_output=True, text=True,
                          timeout=timeout)


def wait_for(probe: Callable[[], Any], what: str, timeout: float = DEFAULT_WAIT,
             interval: float = 0.25) -> Any:
    """Call ``probe`` until it returns a truthy value (returned); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        time.sleep(interval)


class Prometheus:
    """One Prometheus server process (see the module docstring)."""

    def __init__(self, workdir: Path, *, interval: float = 1.0) -> None:
        self.workdir = workdir
        self.interval = interval
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.config_file = workdir / "prometheus.yml"
        self.log_file = workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- config --------------------------------------------------------------------------------

    def write_config(self, targets: Sequence[ScrapeTarget], rule_files: Sequence[str | Path] = ()) -> None:
        # JSON is YAML: no YAML library needed to write the config.
        jobs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for t in targets:
            jobs.setdefault((t.job, t.path), []).append(
                {"targets": [t.address], "labels": dict(t.labels)})
        seconds = f"{self.interval:g}s"
        config = {
            "global": {"scrape_interval": seconds, "scrape_timeout": seconds,
                       "evaluation_interval": seconds},
            "rule_files": [str(Path(f).resolve()) for f in rule_files],
            "scrape_configs": [
                {"job_name": job if i == 0 else f"{job}-{i}", "metrics_path": path,
                 "static_configs": static}
                for i, ((job, path), static) in enumerate(sorted(jobs.items()))
            ],
        }
        self.config_file.write_text(json.dumps(config, indent=1))

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self, targets: Sequence[ScrapeTarget], rule_files: Sequence[str | Path] = ()) -> Prometheus:
        self.write_config(targets, rule_files)
        exe = binary("prometheus")
        for _attempt in range(3):       # a free port can be taken between probe and bind
            self.port = free_port()
            log = self.log_file.open("ab")
            self.proc = subprocess.Popen(
                [exe, f"--config.file={self.config_file}",
                 f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle",
                 "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            log.close()
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self._ready():
                    return self
                time.sleep(0.2)
            self.stop()
            if "address already in use" not in self.log_file.read_text(errors="replace"):
                break
        raise AssertionError(f"prometheus did not start; its log:\n{self.log_tail()}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)

    def reload(self, targets: Sequence[ScrapeTarget], rule_files: Sequence[str | Path] = ()) -> None:
        self.write_config(targets, rule_files)
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200, r.read()

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    # ---- HTTP API ------------------------------------------------------------------------------

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the ``data`` of a success answer, AssertionError otherwise."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:   # a bad query answers 400 with the error in JSON
            body = json.loads(e.read() or b"{}")
        if body.get("status") != "success":
            raise AssertionError(f"prometheus {path} {params}: {body.get('errorType')}: "
                                 f"{body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        result = data["result"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": result}]
        return result

    def values(self, expr: str) -> dict[frozenset[tuple[str, str]], float]:
        """The instant vector of ``expr`` as {labels: value}."""
        return {frozenset(s["metric"].items()): float(s["value"][1]) for s in self.query(expr)}

    def wait_for_series(self, expr: str, timeout: float = DEFAULT_WAIT,
                        check: Callable[[list[dict[str, Any]]], bool] = bool) -> list[dict[str, Any]]:
        """Query ``expr`` until its result is non-empty (and satisfies ``check``)."""
        def probe() -> list[dict[str, Any]] | None:
            result = self.query(expr)
            return result if result and check(result) else None
        return wait_for(probe, f"series of {expr!r}", timeout)

    def targets(self) -> list[dict[str, Any]]:
        return self.api("targets")["activeTargets"]

    def wait_targets_up(self, timeout: float = DEFAULT_WAIT) -> list[dict[str, Any]]:
        def probe() -> list[dict[str, Any]] | None:
            ts = self.targets()
            return ts if ts and all(t["health"] == "up" for t in ts) else None
        try:
            return wait_for(probe, "every scrape target up", timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}\ntargets: {self.targets()}") from None

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]

    def rules(self) -> list[dict[str, Any]]:
        return self.api("rules")["groups"]

    def alert_state(self, name: str) -> str | None:
        """``firing``, ``pending`` or None (inactive) for the alert ``name`` (any labels)."""
        states = {a["state"] for a in self.alerts() if a["labels"].get("alertname") == name}
        return "firing" if "firing" in states else ("pending" if states else None)

    def wait_for_alert(self, name: str, state: str | None = "firing",
                       timeout: float = DEFAULT_WAIT) -> None:
        """Wait until the alert is in ``state`` (None: inactive, i.e. resolved)."""
        wait_for(lambda: self.alert_state(name) == state, f"alert {name} {state or 'inactive'}",
                 timeout)


def _factory(base: Path, started: list[Prometheus]) -> Callable[..., Prometheus]:
    def factory(targets: Sequence[ScrapeTarget], rule_files: Sequence[str | Path] = (), *,
                interval: float = 1.0) -> Prometheus:
        prom = Prometheus(Path(tempfile.mkdtemp(prefix="prom-", dir=base)), interval=interval)
        started.append(prom)
        return prom.start(targets, rule_files)
    return factory


@pytest.fixture
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Prometheus]]:
    """Factory: ``prometheus(targets, rule_files=(), interval=1.0)`` starts a server; every server
    it started is stopped at the test's teardown (their temp dirs are pytest's)."""
    started: list[Prometheus] = []
    try:
        yield _factory(tmp_path_factory.getbasetemp(), started)
    finally:
        for prom in started:
            prom.stop()


@pytest.fixture(scope="module")
def prometheus_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Prometheus]]:
    """The same factory, its servers stopped at the end of the module (share one across tests)."""
    started: list[Prometheus] = []
    try:
        yield _factory(tmp_path_factory.getbasetemp(), started)
    finally:
        for prom in started:
            prom.stop()


__all__ = ["Prometheus", "ScrapeTarget", "free_port", "prometheus", "prometheus_module", "promtool",
           "wait_for"]
