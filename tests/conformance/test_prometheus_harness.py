"""The real-Prometheus harness itself: a server scrapes a prometheus-client endpoint, answers
queries, evaluates a rule file, and promtool judges rules and expositions."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    generate_latest,
    start_http_server,
)

from tests.conformance.prometheus_helpers import ScrapeTarget, free_port, promtool

RULES = """\
groups:
  - name: harness
    rules:
      - alert: HarnessGaugeHigh
        expr: harness_value > 5
        for: 1s
"""


def test_scrape_query_and_alert(prometheus, tmp_path: Path) -> None:
    registry = CollectorRegistry()
    gauge = Gauge("harness_value", "a value the test sets", ["kind"], registry=registry)
    gauge.labels(kind="a").set(3)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        rules = tmp_path / "rules.yml"
        rules.write_text(RULES)
        prom = prometheus([ScrapeTarget(f"127.0.0.1:{port}", labels={"Env": "test"})], [rules])
        prom.wait_targets_up()
        series = prom.wait_for_series('harness_value{kind="a"}')
        assert series[0]["metric"]["Env"] == "test"
        assert float(series[0]["value"][1]) == 3.0
        assert prom.alert_state("HarnessGaugeHigh") is None
        gauge.labels(kind="a").set(9)
        prom.wait_for_alert("HarnessGaugeHigh", "firing")
        gauge.labels(kind="a").set(1)
        prom.wait_for_alert("HarnessGaugeHigh", None)
    finally:
        server.shutdown()
        thread.join(10)


def test_promtool_judges(tmp_path: Path) -> None:
    good = tmp_path / "good.yml"
    good.write_text(RULES)
    assert promtool("check", "rules", str(good)).returncode == 0
    bad = tmp_path / "bad.yml"
    bad.write_text(RULES.replace("harness_value > 5", "harness_value >"))
    assert promtool("check", "rules", str(bad)).returncode != 0

    registry = CollectorRegistry()
    Gauge("harness_bytes", "bytes", registry=registry).set(1)
    r = promtool("check", "metrics", input=generate_latest(registry).decode())
    assert r.returncode == 0, r.stdout + r.stderr
    # promtool's linter flags a counter without the _total suffix: proof it reads the input
    r = promtool("check", "metrics", input="# HELP x_count c\n# TYPE x_count counter\nx_count 1\n")
    assert r.returncode != 0 and '"_total" suffix' in r.stdout + r.stderr
