"""``rmqwire exporter`` against real clusters, judged by the official tools and a real Prometheus.

Each cluster (the official 5.3.3, the official 4.9.7 [slow], and rmqwire's own NameServer + Broker)
gets the same traffic from the official Java client: a producer sends 40 messages to a 4-queue topic,
two push consumers read them (group A stays online, group B stops after 40), then 30 more messages
arrive, which only A consumes (B's backlog: 30); a producer group stays registered. Once the
offsets are committed and the exporter (``python -m rmqwire exporter``, a subprocess) has run a cycle
after that, its families must equal what the admin tool prints for the same state: the official
``mqadmin`` for the official clusters; for rmqwire's servers ``rmqadmin``, whose output is proven
equal to mqadmin's (tests/conformance/test_rmqadmin.py) and which saves JVM starts.

Then Prometheus (Debian's package) scrapes the exporter with the target labels rocketmq-exporter's
dashboard 2 wants (``Env``, ``Cluster``): every panel query of our dashboards (grafana/) and of
rocketmq-exporter's two published dashboards (tests/data/rocketmq_exporter) must return series, the
rule files must pass ``promtool check rules``, the exposition ``promtool check metrics`` (its lint
warnings are rocketmq-exporter's names, kept on purpose), and the backlog alert must fire while B's
consumer is stopped and the producer goes on, and resolve once B consumes again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rmqwire.metrics.exporter import FAMILIES
from tests.conformance.prometheus_helpers import (
    Prometheus,
    ScrapeTarget,
    free_port,
    promtool,
    wait_for,
)

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "rocketmq_exporter"
INTERVAL = 2.0          # exporter cycle (s)
FIRST, SECOND = 40, 30  # messages before and after group B stopped


# ---- the exporter process -------------------------------------------------------------------


class ExporterProcess:
    def __init__(self, namesrv: str, workdir: Path) -> None:
        self.port = free_port()
        self.log = workdir / "exporter.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rmqwire", "exporter", "-n", namesrv, "--host", "127.0.0.1",
                 "--port", str(self.port), "--interval", str(INTERVAL), "--expire", "30"],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)})

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def text(self) -> str:
        with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=30) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return r.read().decode()

    def scrape(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for fam in text_string_to_metric_families(self.text()):
            for s in fam.samples:
                out.setdefault(s.name, []).append((s.labels, s.value))
        return out

    def cycles(self) -> int:
        try:
            series = self.scrape().get("rmqwire_exporter_cycles_total", [])
        except OSError:
            return 0
        return int(series[0][1]) if series else 0

    def fresh(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """The exposition after a whole cycle that started after this call."""
        n = self.cycles()
        wait_for(lambda: self.cycles() >= n + 2, "two more exporter cycles", 120)
        return self.scrape()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(20)


def values(scraped: dict[str, list[tuple[dict[str, str], float]]], family: str,
           **match: str) -> list[tuple[dict[str, str], float]]:
    return [(lab, v) for lab, v in scraped.get(family, [])
            if all(lab.get(k) == want for k, want in match.items())]


def one(scraped: dict[str, list[tuple[dict[str, str], float]]], family: str, **match: str) -> float:
    found = values(scraped, family, **match)
    assert len(found) == 1, f"{family} {match}: {found}"
    return found[0][1]


# ---- the world: a cluster, traffic, the exporter ----------------------------------------------


@dataclass
class World:
    kind: str
    cluster: Any
    namesrv: str
    broker_addr: str
    broker_name: str
    cluster_name: str
    version: str
    topic: str
    group_a: str
    group_b: str
    producer_group: str
    exporter: ExporterProcess
    workdir: Path
    client_id_a: str = ""
    peers: list[Any] = field(default_factory=list)

    def admin_tool(self, *args: str) -> str:
        """mqadmin's output for the official clusters, rmqadmin's (the same text) for ours."""
        if self.kind == "rmqwire":
            r = subprocess.run([sys.executable, "-m", "rmqwire", "admin", *args, "-n", self.namesrv],
                               capture_output=True, text=True, timeout=120, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
            assert r.returncode == 0, r.stderr
            return r.stdout
        from tools.reference.mqadmin import run_mqadmin

        return run_mqadmin(self.cluster, *args, timeout=180).check().stdout


CLUSTERS = ["official-5.3.3", pytest.param("official-4.9.7", marks=pytest.mark.slow), "rmqwire"]


def retried(step: Callable[[], Any], attempts: int = 3) -> Any:
    from tools.peers.process import PeerError

    for attempt in range(attempts):
        try:
            return step()
        except PeerError:
            if attempt == attempts - 1:
                raise
    return None


def _committed(namesrv: str, group: str, topic: str, diff_ok: Callable[[int], bool]) -> bool:
    from rmqwire import Admin

    with Admin(namesrv) as admin:
        try:
            stats = admin.examine_consume_stats(group, topic)
        except Exception:  # noqa: BLE001 - not there yet
            return False
    rows = [o for mq, o in stats.offset_table.items() if mq.topic == topic]
    return len(rows) == 4 and diff_ok(sum(o.broker_offset - o.consumer_offset for o in rows))


@pytest.fixture(scope="module", params=CLUSTERS)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from tools.peers.java_peer import JavaPeer
    from tools.peers.topics import create_topic

    kind = request.param
    workdir = tmp_path_factory.mktemp(f"exporter-{kind}")
    own = None
    if kind == "rmqwire":
        from rmqwire.testing import start_cluster

        cluster = own = start_cluster(workdir / "store")
        version = "5.3.3"
    else:
        cluster = request.getfixturevalue(
            "reference_cluster" if kind == "official-5.3.3" else "reference_cluster_v4")
        version = cluster.version
    suffix = uuid.uuid4().hex[:6]
    topic, group_a, group_b = f"ExpT_{suffix}", f"ExpA_{suffix}", f"ExpB_{suffix}"
    producer_group = f"ExpP_{suffix}"
    peers: list[Any] = []
    exporter = None
    try:
        create_topic(cluster.broker_addr, topic, queues=4, namesrv_addr=cluster.namesrv_addr)
        peer = JavaPeer(cluster.namesrv_addr)   # the 5.3.3 client, for the 4.9.7 broker too
        # a loaded machine makes a Java client's first request time out now and then: retry
        retried(lambda: peer.produce(topic, FIRST, body_size=100))

        def start_a() -> Any:
            a = peer.start_consumer(topic, 1_000_000, group=group_a, timeout_ms=1_800_000)
            peers.insert(0, a)
            a.wait_started(120)
            return a

        a = retried(start_a)
        retried(lambda: peer.consume(topic, FIRST, group=group_b, timeout_ms=120_000))  # B stops
        retried(lambda: peer.produce(topic, SECOND, body_size=100))
        dlq = f"%DLQ%{group_b}"      # a dead letter of B (as the broker would store it)
        create_topic(cluster.broker_addr, dlq, queues=1, namesrv_addr=cluster.namesrv_addr)
        retried(lambda: peer.produce(dlq, 1, body_size=10))

        # a producer group that stays registered (rmqwire's client: the Java helper's single
        # send times out too often on a loaded machine to be relied on)
        from rmqwire import Message, Producer

        holder = Producer(producer_group, namesrv_addr=cluster.namesrv_addr)
        holder.start()
        peers.append(holder)
        holder.send(Message(topic, b"hold"))
        wait_for(lambda: _committed(cluster.namesrv_addr, group_a, topic, lambda d: d == 0),
                 "A's offsets", 180)
        wait_for(lambda: _committed(cluster.namesrv_addr, group_b, topic, lambda d: d >= SECOND),
                 "B's offsets", 180)
        assert a.running()
        exporter = ExporterProcess(cluster.namesrv_addr, workdir)
        w = World(kind, cluster, cluster.namesrv_addr, cluster.broker_addr, cluster.broker_name,
                  cluster.cluster_name, version, topic, group_a, group_b, producer_group, exporter,
                  workdir, peers=peers)
        yield w
    finally:
        if exporter is not None:
            exporter.stop()
            log = exporter.log.read_text(errors="replace")
            print(f"exporter log ({kind}):\n{log[-4000:]}")
        for p in peers:
            p.stop() if hasattr(p, "stop") else p.shutdown()
        if own is not None:
            own.stop()


@pytest.fixture(scope="module")
def scraped(world: World) -> dict[str, list[tuple[dict[str, str], float]]]:
    return world.exporter.fresh()


# ---- families against the official tools ------------------------------------------------------


def test_every_family_of_rocketmq_exporter_is_exposed(world: World) -> None:
    text = world.exporter.fresh() and world.exporter.text()
    for name, spec in FAMILIES.items():
        assert f"# TYPE {name} gauge\n" in text, name
        assert f"# HELP {name} {spec.help}\n" in text, name
    for labels, _ in values(world.exporter.scrape(), "rocketmq_brokeruntime_put_tps10"):
        assert set(labels) == {"cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"}


#: Empty in the Java exporter too: never written (the first two), need a slave, or a group
#: consuming a %DLQ% topic (the Java task skips those topics).
NEVER = {"rocketmq_group_consume_tps", "rocketmq_group_consume_total_offset",
         "rocketmq_broker_commitlog_diff", "rocketmq_group_dlqdiff"}


def test_families_filled(world: World, scraped: dict[str, Any]) -> None:
    # a young broker has no 60 s / 600 s TPS yet ("0.0 0.0 " in putTps) and no latency
    # distribution before its first minute ("null"): test_brokeruntime_is_broker_status has those
    empty = sorted(n for n in FAMILIES if n not in NEVER and not scraped.get(n)
                   and not n.endswith(("_tps60", "_tps600")) and "_pmdt_" not in n)
    assert empty == [], f"families without series on {world.kind}"
    errors = values(scraped, "rmqwire_exporter_errors_total")
    assert errors == [], errors


def _topic_status_max(text: str, broker: str) -> int:
    total = 0
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == broker and all(c.lstrip("-").isdigit() for c in cols[1:4]):
            total += int(cols[3])
    return total


def test_producer_offset_is_topic_status_max_offsets(world: World, scraped: dict[str, Any]) -> None:
    text = world.admin_tool("topicStatus", "-t", world.topic)
    expected = _topic_status_max(text, world.broker_name)
    assert expected >= FIRST + SECOND + 1          # (+1: the holding producer's message)
    fresh = world.exporter.fresh()
    assert one(fresh, "rocketmq_producer_offset", topic=world.topic, broker=world.broker_name,
               cluster=world.cluster_name) == expected


def _progress(text: str, topic: str) -> tuple[int, int]:
    """(broker offset total, consumer offset total) of ``topic`` in consumerProgress -g output."""
    broker = consumer = 0
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0] == topic and cols[2].isdigit():
            broker += int(cols[3])
            consumer += int(cols[4])
    return broker, consumer


def test_group_diff_and_offsets_are_consumer_progress(world: World) -> None:
    fresh = world.exporter.fresh()
    for group, online in ((world.group_a, 1), (world.group_b, 0)):
        text = world.admin_tool("consumerProgress", "-g", group)
        broker_total, consumer_total = _progress(text, world.topic)
        diff = broker_total - consumer_total
        assert (diff == 0) if online else (diff >= SECOND), text
        (labels, value), = values(fresh, "rocketmq_group_diff", group=group, topic=world.topic)
        assert value == diff
        assert labels["countOfOnlineConsumers"] == str(online) and labels["msgModel"] == "1"
        assert one(fresh, "rocketmq_consumer_offset", group=group, topic=world.topic,
                   broker=world.broker_name) == consumer_total
    # B's next message has waited since it was stored; A is caught up
    lag_b = one(fresh, "rocketmq_group_get_latency_by_storetime", group=world.group_b, topic=world.topic)
    assert 0 < lag_b < 3_600_000
    assert one(fresh, "rocketmq_group_get_latency_by_storetime", group=world.group_a,
               topic=world.topic) == 0


def test_group_count_is_consumer_connection(world: World) -> None:
    text = world.admin_tool("consumerConnection", "-g", world.group_a)
    table = text.split("#ClientId", 1)[1].split("\n\n", 1)[0]
    rows = [line.split() for line in table.splitlines()[1:] if line.strip()]
    assert len(rows) == 1, text
    client_id, client_addr = rows[0][0], rows[0][1]
    fresh = world.exporter.fresh()
    (labels, count), = values(fresh, "rocketmq_group_count", group=world.group_a)
    assert count == len(rows)
    assert labels["localaddr"] == client_id and labels["caddr"] == client_addr
    (labels, count), = values(fresh, "rocketmq_group_count", group=world.group_b)
    assert count == 0 and labels["caddr"] == ""
    # the client's own figures, asked through the broker (GET_CONSUMER_RUNNING_INFO)
    got = values(fresh, "rocketmq_client_consume_ok_msg_tps", group=world.group_a, topic=world.topic)
    assert [lab["clientId"] for lab, _ in got] == [client_id]


#: brokerStatus keys that do not move while no message is sent (gets move: the exporter pulls)
STABLE = {"msgPutTotalTodayNow": "msg_put_total_today_now",
          "commitLogMaxOffset": "commitlog_maxoffset", "commitLogMinOffset": "commitlog_minoffset",
          "sendThreadPoolQueueCapacity": "send_threadpoolqueue_capacity",
          "pullThreadPoolQueueCapacity": "pull_threadpoolqueue_capacity",
          "queryThreadPoolQueueCapacity": "query_threadpool_queue_capacity",
          "msgPutTotalTodayMorning": "msg_puttotal_todaymorning",
          "msgPutTotalYesterdayMorning": "msg_puttotal_yesterdaymorning",
          "earliestMessageTimeStamp": "earliest_message_timestamp",
          "putMessageTimesTotal": "putmessage_times_total",
          "putMessageSizeTotal": "put_message_size_total"}


def test_brokeruntime_is_broker_status(world: World) -> None:
    from tools.reference.mqadmin import parse_broker_status

    def runtime_of(fresh: dict[str, Any]) -> dict[str, Any]:
        return {name[len("rocketmq_brokeruntime_"):]: series
                for name, series in fresh.items() if name.startswith("rocketmq_brokeruntime_")}

    def tps_windows(runtime: dict[str, Any]) -> int:
        return sum(1 for w in ("10", "60", "600") if runtime.get(f"put_tps{w}"))

    # the put-TPS windows fill as the broker's once-a-second samples reach 11, 61 and 601: one can fill
    # between mqadmin's read and the exporter's (seen at CI load), so mqadmin's count is bounded by the
    # exporter's just before and just after it
    before = tps_windows(runtime_of(world.exporter.fresh()))
    status = parse_broker_status(world.admin_tool("brokerStatus", "-b", world.broker_addr))
    runtime = runtime_of(world.exporter.fresh())
    (labels, _), = runtime["msg_put_total_today_now"]
    assert labels["brokerIP"] == world.broker_addr and labels["cluster"] == world.cluster_name
    assert labels["des"] == status["brokerVersionDesc"]
    assert labels["boottime"] == status["bootTimestamp"]
    assert labels["broker_version"] == status["brokerVersion"]
    compared = 0
    for key, suffix in STABLE.items():
        if key in status:
            (_, value), = runtime[suffix]
            assert value == float(status[key]), key
            compared += 1
    assert compared >= 8
    tps = status["putTps"].split()     # "10s 60s 600s", a window left empty until it has samples
    assert before <= len(tps) <= tps_windows(runtime) and len(tps) >= 1, (before, tps)
    buckets = status["putMessageDistributeTime"].split()   # "null" in the broker's first minute
    pmdt = sorted(n for n in runtime if n.startswith("pmdt_"))
    assert len(pmdt) == 13 if len(buckets) == 13 else len(pmdt) in (0, 13), (buckets, pmdt)


def test_stats_not_exist_is_quiet(world: World) -> None:
    """A topic nobody wrote to: the broker has no TOPIC_PUT_NUMS item for it ("The stats
    <TOPIC_PUT_NUMS> <topic> not exist"): exported as 0, not counted as an error, not logged."""
    from tools.peers.topics import create_topic

    quiet = f"ExpQuiet_{uuid.uuid4().hex[:6]}"
    create_topic(world.broker_addr, quiet, queues=2, namesrv_addr=world.namesrv)
    fresh = world.exporter.fresh()
    fresh = world.exporter.fresh() if not values(fresh, "rocketmq_producer_tps", topic=quiet) else fresh
    assert one(fresh, "rocketmq_producer_tps", topic=quiet) == 0
    assert one(fresh, "rocketmq_producer_offset", topic=quiet) == 0
    assert values(fresh, "rmqwire_exporter_errors_total") == []
    assert "not exist" not in world.exporter.log.read_text(errors="replace")


# ---- a real Prometheus: dashboards, rules, exposition, the backlog alert ----------------------

BACKLOG_FOR = "8s"     # longer than the consumers' 5 s offset commit: a commit-sized bump never fires


@pytest.fixture(scope="module")
def prom(world: World, prometheus_module: Callable[..., Prometheus]) -> Prometheus:
    from grafana.build import alerts_yaml

    rules = world.workdir / "alerts.yml"
    rules.write_text(alerts_yaml(backlog_window="30s", backlog_for=BACKLOG_FOR))
    target = ScrapeTarget(world.exporter.address, labels={"Env": "test", "Cluster": world.cluster_name})
    p = prometheus_module([target], [rules])
    p.wait_targets_up()
    # a broker's latency distribution appears after its first minute ("null" before)
    p.wait_for_series("rocketmq_brokeruntime_pmdt_0ms", timeout=180)
    p.wait_for_series(f'rocketmq_topic_dlq_offset{{group="{world.group_b}"}}')
    p.wait_for_series(f'rocketmq_client_consume_ok_msg_tps{{group="{world.group_a}"}}')
    return p


def _dashboard_queries(path: Path) -> list[tuple[str, str]]:
    d = json.loads(path.read_text())
    panels: list[dict[str, Any]] = []

    def walk(ps: list[dict[str, Any]]) -> None:
        for p in ps:
            panels.append(p)
            walk(p.get("panels", []))

    walk(d.get("panels", []))
    for row in d.get("rows", []):
        walk(row.get("panels", []))
    return [(p.get("title", ""), t["expr"]) for p in panels for t in p.get("targets", []) if t.get("expr")]


def _substitute(expr: str, world: World) -> str:
    """Grafana's variables as a user picking the test cluster and "All" would set them."""
    for var, value in (("$env", "test"), ("$cluster", world.cluster_name)):
        expr = re.sub(re.escape(var) + r"\b", value, expr)
    expr = re.sub(r'=~"\$(broker|topic|group)"', '=~".*"', expr)
    return expr


#: Queries that select on a value and are empty by design in a healthy test cluster, with the
#: query that shows their data exists.
CONDITIONAL = {
    "< 0": "a negative backlog (an anomaly)",
    "> 100000": "a backlog above 100 000 messages",
}


def _dashboards() -> list[Path]:
    return sorted((ROOT / "grafana" / "dashboards").glob("*.json")) + [
        DATA / "rocketmq_exporter_overview.json", DATA / "rocketmq_exporter.json"]


@pytest.mark.parametrize("dashboard", _dashboards(), ids=lambda p: p.stem)
def test_every_panel_query_returns_series(world: World, prom: Prometheus, dashboard: Path) -> None:
    queries = _dashboard_queries(dashboard)
    assert len(queries) >= 6
    empty = []
    for title, expr in queries:
        promql = _substitute(expr, world)
        result = prom.query(promql)    # a bad query fails here (HTTP 400 from Prometheus)
        conditional = next((why for cond, why in CONDITIONAL.items() if cond in expr), None)
        if conditional:
            base = promql.rsplit(next(c for c in CONDITIONAL if c in expr), 1)[0]
            assert prom.query(base), (title, base)
            print(f"PANEL {world.kind} | {dashboard.stem} | {title} | {len(result)} series "
                  f"(selects {conditional}; its data: {len(prom.query(base))} series)")
            continue
        if not result:
            empty.append((title, promql))
        print(f"PANEL {world.kind} | {dashboard.stem} | {title} | {len(result)} series")
    assert empty == [], f"panels without series on {world.kind}"


def test_rules_pass_promtool(world: World) -> None:
    from grafana.build import alerts_yaml

    for path in (ROOT / "grafana" / "alerts.yml", DATA / "example.rules"):
        r = promtool("check", "rules", str(path))
        assert r.returncode == 0, r.stdout + r.stderr
    short = world.workdir / "short.yml"
    short.write_text(alerts_yaml(backlog_window="30s", backlog_for=BACKLOG_FOR))
    assert promtool("check", "rules", str(short)).returncode == 0


def test_exposition_passes_promtool_check_metrics(world: World) -> None:
    r = promtool("check", "metrics", input=world.exporter.text())
    # promtool parses the whole text (a format error is a failure with no lint list) and lints names;
    # the only findings allowed are rocketmq-exporter's own names, kept for its dashboards
    findings = [line for line in (r.stdout + r.stderr).splitlines() if line.strip()]
    assert findings, "promtool printed nothing: it lints rocketmq-exporter's names"
    for line in findings:
        name = line.split()[0]
        assert name.startswith("rocketmq_") and name in FAMILIES, line


def test_backlog_alert_fires_and_resolves(world: World, prom: Prometheus) -> None:
    """B is offline; the Java producer sends for ~40 s: the backlog rule fires while it sends.
    Then B consumes again and the rule resolves."""
    from tools.peers.java_peer import JavaPeer

    assert prom.alert_state("RocketMQConsumerBacklogGrowing") is None
    peer = JavaPeer(world.namesrv)
    producer = peer.spawn(peer.produce_args(world.topic, 130, body_size=50, extra=["--interval-ms", "300"]),
                          dict, 300)
    b = None
    try:
        producer.wait_started(120)

        def firing_groups() -> set[str]:
            return {a["labels"]["group"] for a in prom.alerts()
                    if a["labels"]["alertname"] == "RocketMQConsumerBacklogGrowing" and a["state"] == "firing"}

        # another group of the world may fire first; B's own alert is the one this test is about
        wait_for(lambda: world.group_b in firing_groups(), "the backlog alert firing for group B", 120)
        assert producer.running(), "the alert fired only after the producer stopped"
        b = peer.start_consumer(world.topic, 1_000_000, group=world.group_b, timeout_ms=600_000)
        b.wait_started(120)
        producer.finish(timeout=240)
        prom.wait_for_alert("RocketMQConsumerBacklogGrowing", None, timeout=120)
    finally:
        producer.stop()
        if b is not None:
            b.stop()
