"""Build rmqwire's Grafana dashboards and Prometheus alert rules from code.

    python -m grafana.build            # writes grafana/dashboards/*.json and grafana/alerts.yml
    python -m grafana.build --check    # exit 1 if a committed file differs from what the code builds

The dashboards (grafana-foundation-sdk builders) read the families of ``rmqwire exporter``, which
are rocketmq-exporter's: an overview (cluster health, put/get TPS, put latency distribution, disk),
a topic view, a consumer-group view (lag in messages and in time, consume TPS, failures, retry and
DLQ) and a client view (each consumer's own figures). Every panel filters by the variables
``cluster``, ``broker``, ``topic`` and ``group`` where its family has that label (``rocketmq_group_diff``
has no cluster or broker label, the broker runtime families have no broker or topic label).
tests/unit/metrics/test_grafana_build.py fails when the committed files are stale;
tests/conformance/test_exporter.py runs every panel query against a real Prometheus.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DASHBOARDS = HERE / "dashboards"
ALERTS = HERE / "alerts.yml"

DS = "${datasource}"
# label matchers by variable
C, B, T, G = 'cluster=~"$cluster"', 'broker=~"$broker"', 'topic=~"$topic"', 'group=~"$group"'


def sel(*matchers: str) -> str:
    return "{" + ",".join(matchers) + "}"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class PanelSpec:
    title: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"            # timeseries | stat | gauge
    description: str = ""
    thresholds: tuple[tuple[float, str], ...] = ()   # (value, color) steps above the base
    base: str = "green"
    width: int = 12
    height: int = 8


def q(expr: str, legend: str = "") -> Query:
    return Query(expr, legend)


# ---- the four views ------------------------------------------------------------------------------

PMDT = [("0ms", "0 ms"), ("0to10ms", "0-10 ms"), ("10to50ms", "10-50 ms"), ("50to100ms", "50-100 ms"),
        ("100to200ms", "100-200 ms"), ("200to500ms", "200-500 ms"), ("500to1s", "0.5-1 s"),
        ("1to2s", "1-2 s"), ("2to3s", "2-3 s"), ("3to4s", "3-4 s"), ("4to5s", "4-5 s"),
        ("5to10s", "5-10 s"), ("10stomore", "> 10 s")]

OVERVIEW = [
    PanelSpec("Brokers reporting", (q(f"count(rocketmq_brokeruntime_msg_put_total_today_now{sel(C)})"),),
              kind="stat", width=6, height=5, base="red", thresholds=((1, "green"),),
              description="Masters whose runtime info the exporter read in the last cycles"),
    PanelSpec("Put TPS (cluster)", (q(f"sum(rocketmq_broker_tps{sel(C, B)})", "put"),), unit="ops",
              kind="stat", width=6, height=5),
    PanelSpec("Get TPS (cluster)", (q(f"sum(rocketmq_broker_qps{sel(C, B)})", "get"),), unit="ops",
              kind="stat", width=6, height=5),
    PanelSpec("Total backlog", (q(f"sum(rocketmq_group_diff{sel(T, G)})", "messages"),), kind="stat",
              width=6, height=5, thresholds=((1000, "orange"), (100000, "red"))),
    PanelSpec("Put TPS by broker", (q(f"sum by (broker) (rocketmq_broker_tps{sel(C, B)})", "{{broker}}"),),
              unit="ops"),
    PanelSpec("Get TPS by broker", (q(f"sum by (broker) (rocketmq_broker_qps{sel(C, B)})", "{{broker}}"),),
              unit="ops"),
    PanelSpec("Put latency distribution (puts in the last minute)", tuple(
        q(f"sum(rocketmq_brokeruntime_pmdt_{s}{sel(C)})", legend) for s, legend in PMDT),
        description="putMessageDistributeTime of the brokers: puts per latency range"),
    PanelSpec("Put latency p99 / p99.9", (
        q(f"max by (brokerIP) (rocketmq_brokeruntime_put_latency_99{sel(C)})", "p99 {{brokerIP}}"),
        q(f"max by (brokerIP) (rocketmq_brokeruntime_put_latency_999{sel(C)})", "p99.9 {{brokerIP}}")),
        unit="ms", thresholds=((100, "orange"), (500, "red"))),
    PanelSpec("CommitLog disk used", (
        q(f"max by (brokerIP) (rocketmq_brokeruntime_commitlog_disk_ratio{sel(C)}) * 100", "{{brokerIP}}"),),
        unit="percent", kind="gauge", thresholds=((75, "orange"), (85, "red"))),
    PanelSpec("CommitLog disk free", (
        q(f"max by (brokerIP) (rocketmq_brokeruntime_commitlogdir_capacity_free{sel(C)})", "{{brokerIP}}"),),
        unit="bytes"),
    PanelSpec("Request queue head wait", (
        q(f"max by (brokerIP) (rocketmq_brokeruntime_send_threadpoolqueue_headwait_timemills{sel(C)})",
          "send {{brokerIP}}"),
        q(f"max by (brokerIP) (rocketmq_brokeruntime_pull_threadpoolqueue_headwait_timemills{sel(C)})",
          "pull {{brokerIP}}")), unit="ms", thresholds=((100, "orange"), (1000, "red"))),
    PanelSpec("Exporter cycle duration", (q("max(rmqwire_exporter_cycle_duration_seconds)", "cycle"),),
              unit="s", description="rmqwire exporter: how long a collection cycle takes"),
]

TOPIC = [
    PanelSpec("Produce TPS by topic", (
        q(f"sum by (topic) (rocketmq_producer_tps{sel(C, B, T)})", "{{topic}}"),), unit="ops"),
    PanelSpec("Produce throughput by topic", (
        q(f"sum by (topic) (rocketmq_producer_message_size{sel(C, B, T)})", "{{topic}}"),), unit="Bps"),
    PanelSpec("Messages stored (max offset) by topic", (
        q(f"sum by (topic) (rocketmq_producer_offset{sel(C, B, T)})", "{{topic}}"),)),
    PanelSpec("Consume TPS on the topic by group", (
        q(f"sum by (topic, group) (rocketmq_consumer_tps{sel(C, B, T, G)})", "{{topic}} @ {{group}}"),),
        unit="ops"),
    PanelSpec("Backlog on the topic by group", (
        q(f"sum by (topic, group) (rocketmq_group_diff{sel(T, G)})", "{{topic}} @ {{group}}"),),
        thresholds=((1000, "orange"), (100000, "red"))),
    PanelSpec("Producers by group", (
        q(f"sum by (group) (rocketmq_producer_count{sel(C, B)})", "{{group}}"),)),
]

GROUP = [
    PanelSpec("Backlog (messages)", (
        q(f"sum by (group, topic) (rocketmq_group_diff{sel(T, G)})", "{{group}} / {{topic}}"),),
        thresholds=((1000, "orange"), (100000, "red"))),
    PanelSpec("Lag (time since the next message was stored)", (
        q(f"max by (group, topic) (rocketmq_group_get_latency_by_storetime{sel(C, B, T, G)})",
          "{{group}} / {{topic}}"),), unit="ms", thresholds=((60000, "orange"), (300000, "red"))),
    PanelSpec("Consume TPS", (
        q(f"sum by (group, topic) (rocketmq_consumer_tps{sel(C, B, T, G)})", "{{group}} / {{topic}}"),),
        unit="ops"),
    PanelSpec("Consume throughput", (
        q(f"sum by (group, topic) (rocketmq_consumer_message_size{sel(C, B, T, G)})",
          "{{group}} / {{topic}}"),), unit="Bps"),
    PanelSpec("Consume failures (clients, per second)", (
        q(f"sum by (group) (rocketmq_client_consume_fail_msg_tps{sel(T, G)})", "{{group}}"),),
        unit="ops", thresholds=((0.001, "red"),)),
    PanelSpec("Online consumers", (q(f"max by (group) (rocketmq_group_count{sel(G)})", "{{group}}"),),
              base="red", thresholds=((1, "green"),)),
    PanelSpec("Retry backlog", (
        q(f"sum by (group) (rocketmq_group_retrydiff{sel(G)})", "{{group}}"),),
        thresholds=((100, "orange"), (10000, "red"))),
    PanelSpec("Sent back for retry (last minute)", (
        q(f"sum by (group, topic) (rocketmq_send_back_nums{sel(C, B, T, G)})", "{{group}} / {{topic}}"),)),
    PanelSpec("Dead-letter messages (DLQ offset)", (
        q(f"sum by (group) (rocketmq_topic_dlq_offset{sel(C, B, G)})", "{{group}}"),),
        thresholds=((1, "orange"),)),
    PanelSpec("Committed offsets", (
        q(f"sum by (group, topic) (rocketmq_consumer_offset{sel(C, B, T, G)})", "{{group}} / {{topic}}"),)),
]

CLIENT = [
    PanelSpec("Consume OK TPS per client", (
        q(f"rocketmq_client_consume_ok_msg_tps{sel(T, G)}", "{{clientId}} {{topic}}"),), unit="ops"),
    PanelSpec("Consume failed TPS per client", (
        q(f"rocketmq_client_consume_fail_msg_tps{sel(T, G)}", "{{clientId}} {{topic}}"),), unit="ops",
        thresholds=((0.001, "red"),)),
    PanelSpec("Failed messages in the last hour", (
        q(f"rocketmq_client_consume_fail_msg_count{sel(T, G)}", "{{clientId}} {{topic}}"),),
        thresholds=((1, "orange"), (100, "red"))),
    PanelSpec("Consume time per message", (
        q(f"rocketmq_client_consume_rt{sel(T, G)}", "{{clientId}} {{topic}}"),), unit="ms",
        thresholds=((1000, "orange"), (5000, "red"))),
    PanelSpec("Pull RT", (q(f"rocketmq_client_consumer_pull_rt{sel(T, G)}", "{{clientId}} {{topic}}"),),
              unit="ms", thresholds=((100, "orange"), (1000, "red"))),
    PanelSpec("Pull TPS", (q(f"rocketmq_client_consumer_pull_tps{sel(T, G)}", "{{clientId}} {{topic}}"),),
              unit="ops"),
]

VIEWS: dict[str, tuple[str, str, list[PanelSpec]]] = {
    "rmqwire-overview": ("RocketMQ overview (rmqwire exporter)", "rmqwire-overview", OVERVIEW),
    "rmqwire-topic": ("RocketMQ topics (rmqwire exporter)", "rmqwire-topic", TOPIC),
    "rmqwire-consumer-group": ("RocketMQ consumer groups (rmqwire exporter)", "rmqwire-group", GROUP),
    "rmqwire-client": ("RocketMQ consumer clients (rmqwire exporter)", "rmqwire-client", CLIENT),
}

#: variable -> (query, depends on)
VARIABLES = [
    ("cluster", "label_values(rocketmq_broker_tps, cluster)"),
    ("broker", 'label_values(rocketmq_broker_tps{cluster=~"$cluster"}, broker)'),
    ("topic", 'label_values(rocketmq_producer_offset{cluster=~"$cluster"}, topic)'),
    ("group", 'label_values(rocketmq_consumer_offset{cluster=~"$cluster"}, group)'),
]


def panel_queries() -> dict[str, list[tuple[str, str]]]:
    """Every (panel title, PromQL) of every view, by dashboard file name (for the tests)."""
    return {name: [(p.title, x.expr) for p in panels for x in p.queries]
            for name, (_, _, panels) in VIEWS.items()}


# ---- dashboards with grafana-foundation-sdk -------------------------------------------------------


def _panel(spec: PanelSpec) -> Any:
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.builders import gauge, prometheus, stat, timeseries
    from grafana_foundation_sdk.models.dashboard import (
        DataSourceRef,
        Threshold,
        ThresholdsMode,
    )

    builder = {"timeseries": timeseries.Panel, "stat": stat.Panel, "gauge": gauge.Panel}[spec.kind]()
    builder.title(spec.title).unit(spec.unit).height(spec.height).span(spec.width)
    builder.datasource(DataSourceRef(type_val="prometheus", uid=DS))
    if spec.description:
        builder.description(spec.description)
    steps = [Threshold(value=None, color=spec.base)]
    steps += [Threshold(value=v, color=c) for v, c in spec.thresholds]
    builder.thresholds(db.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps))
    for i, query in enumerate(spec.queries):
        target = (prometheus.Dataquery().expr(query.expr).ref_id(chr(ord("A") + i))
                  .datasource(DataSourceRef(type_val="prometheus", uid=DS)))
        if query.legend:
            target.legend_format(query.legend)
        builder.with_target(target)
    return builder


def build_dashboard(name: str) -> dict[str, Any]:
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import (
        DataSourceRef,
        VariableOption,
        VariableRefresh,
        VariableSort,
    )

    title, uid, panels = VIEWS[name]
    d = (db.Dashboard(title).uid(uid).tags(["rocketmq", "rmqwire"]).refresh("30s")
         .time("now-1h", "now").timezone("browser").editable())
    d.with_variable(db.DatasourceVariable("datasource").label("Data source").type("prometheus"))
    for var, query in VARIABLES:
        d.with_variable(
            db.QueryVariable(var).label(var).query(query)
            .datasource(DataSourceRef(type_val="prometheus", uid=DS))
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*")
            .current(VariableOption(selected=True, text="All", value="$__all")))
    for spec in panels:
        d.with_panel(_panel(spec))
    out = json.loads(json.dumps(d.build(), cls=JSONEncoder))
    for panel in out["panels"]:
        if panel.get("options") is None:   # the builder writes null; Grafana wants it absent
            panel.pop("options", None)
    return out


# ---- alert rules ----------------------------------------------------------------------------------


def alert_rules(*, backlog_window: str = "10m", backlog_for: str = "10m", lag_ms: int = 300_000,
                lag_for: str = "5m", disk_ratio: float = 0.85, disk_for: str = "5m",
                gone_window: str = "30m", gone_for: str = "2m", dlq_window: str = "10m",
                send_window: str = "5m", send_for: str = "2m") -> dict[str, Any]:
    """The rule file as data; the tests build it with short windows (``for`` and ``[window]``)."""
    def rule(name: str, expr: str, for_: str, summary: str, description: str,
             severity: str = "warning") -> dict[str, Any]:
        return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity},
                "annotations": {"summary": summary, "description": description}}

    runtime = "rocketmq_brokeruntime_msg_put_total_today_now"
    return {"groups": [{"name": "rocketmq-rmqwire", "rules": [
        rule("RocketMQConsumerBacklogGrowing",
             f"sum by (group, topic) (rocketmq_group_diff) > 0 and sum by (group, topic) "
             f"(delta(rocketmq_group_diff[{backlog_window}])) > 0",
             backlog_for, "Consumer group {{ $labels.group }} falls behind on {{ $labels.topic }}",
             "The backlog of {{ $labels.group }} on {{ $labels.topic }} is {{ $value }} messages "
             f"and grew over the last {backlog_window}."),
        rule("RocketMQConsumerLagTimeHigh",
             "max by (cluster, broker, topic, group) (rocketmq_group_get_latency_by_storetime) "
             f"> {lag_ms}",
             lag_for, "Consumer group {{ $labels.group }} lags on {{ $labels.topic }}",
             "The next message of {{ $labels.group }} on {{ $labels.topic }} ({{ $labels.broker }}) "
             "has waited {{ $value | humanizeDuration }} ms since it was stored."),
        rule("RocketMQBrokerDiskHigh",
             f"max by (cluster, brokerIP) (rocketmq_brokeruntime_commitlog_disk_ratio) > {disk_ratio}",
             disk_for, "Broker {{ $labels.brokerIP }} disk above " + f"{disk_ratio:.0%}",
             "The CommitLog disk of {{ $labels.brokerIP }} ({{ $labels.cluster }}) is "
             "{{ $value | humanizePercentage }} full.", "critical"),
        rule("RocketMQBrokerGone",
             f"count by (cluster, brokerIP) (max_over_time({runtime}[{gone_window}])) unless "
             f"count by (cluster, brokerIP) ({runtime})",
             gone_for, "Broker {{ $labels.brokerIP }} is gone",
             f"{{{{ $labels.brokerIP }}}} ({{{{ $labels.cluster }}}}) reported in the last {gone_window} "
             "and no longer does (down, or unregistered from the NameServer).", "critical"),
        rule("RocketMQDLQGrowing",
             f"sum by (cluster, group) (delta(rocketmq_topic_dlq_offset[{dlq_window}])) > 0",
             "0m", "Dead letters for {{ $labels.group }}",
             "{{ $value }} messages of {{ $labels.group }} went to its DLQ in the last "
             f"{dlq_window}."),
        rule("RocketMQSendFailures",
             "sum by (topic, client_id) (rate(rocketmq_send_messages_total{invocation_status="
             f'"failure"}}[{send_window}])) > 0',
             send_for, "Sends to {{ $labels.topic }} fail",
             "Client {{ $labels.client_id }} fails {{ $value }} sends/s to {{ $labels.topic }} "
             "(rmqwire client metrics, rocketmq_send_messages_total)."),
    ]}]}


def alerts_yaml(**params: Any) -> str:
    """The rule file's text (JSON is YAML; one rule per block for people reading it)."""
    header = ("# Prometheus alert rules for RocketMQ, generated by `python -m grafana.build` from\n"
              "# grafana/build.py (edit that, not this). Series: `rmqwire exporter` (rocketmq-\n"
              "# exporter's families) and rmqwire's client metrics.\n")
    return header + json.dumps(alert_rules(**params), indent=2, ensure_ascii=False) + "\n"


# ---- the command ----------------------------------------------------------------------------------


def outputs() -> dict[Path, str]:
    files = {DASHBOARDS / f"{name}.json": json.dumps(build_dashboard(name), indent=2, sort_keys=True) + "\n"
             for name in VIEWS}
    files[ALERTS] = alerts_yaml()
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grafana.build", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed file is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(HERE.parent)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(HERE.parent)}")
    if stale:
        print("stale (run python -m grafana.build): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
