"""grafana/: the committed dashboards and rules are what grafana/build.py builds, and they are sound."""

from __future__ import annotations

import json
import re

from grafana import build
from rmqwire.metrics.exporter import FAMILIES


def test_committed_files_are_not_stale(capsys) -> None:
    assert build.main(["--check"]) == 0, capsys.readouterr().err


#: labels whose values are not the variable's: a producer group ($group lists consumer groups);
#: the %RETRY% topic of a group ($topic lists the business topics)
EXEMPT = {"rocketmq_producer_count": {"group"}, "rocketmq_group_retrydiff": {"topic"}}


def test_every_panel_reads_exporter_families_with_the_variables() -> None:
    own = {"rmqwire_exporter_cycle_duration_seconds"}
    for name, queries in build.panel_queries().items():
        assert queries, name
        for title, expr in queries:
            names = set(re.findall(r"\b(rocketmq_\w+|rmqwire_\w+)", expr))
            assert names and names <= set(FAMILIES) | own, (title, expr)
            labels = {lab for n in names if n in FAMILIES for lab in FAMILIES[n].labels}
            for n in names:
                labels -= EXEMPT.get(n, set())
            for var in ("cluster", "broker", "topic", "group"):
                if var in labels:
                    assert f'{var}=~"${var}"' in expr, (title, expr, var)


def test_dashboards_have_variables_units_and_thresholds() -> None:
    for name in build.VIEWS:
        d = json.loads((build.DASHBOARDS / f"{name}.json").read_text())
        names = [v["name"] for v in d["templating"]["list"]]
        assert names == ["datasource", "cluster", "broker", "topic", "group"]
        for panel in d["panels"]:
            defaults = panel["fieldConfig"]["defaults"]
            assert defaults["unit"] and defaults["thresholds"]["steps"], panel["title"]
            assert panel["datasource"]["uid"] == "${datasource}"


def test_alert_rules_cover_the_issue() -> None:
    rules = build.alert_rules()["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == [
        "RocketMQConsumerBacklogGrowing", "RocketMQConsumerLagTimeHigh", "RocketMQBrokerDiskHigh",
        "RocketMQBrokerGone", "RocketMQDLQGrowing", "RocketMQSendFailures"]
    short = build.alert_rules(backlog_window="20s", backlog_for="2s")["groups"][0]["rules"][0]
    assert "[20s]" in short["expr"] and short["for"] == "2s"
