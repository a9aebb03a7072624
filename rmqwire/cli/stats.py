"""Stats commands: statsAll.

JSON document: {"rows": [{topic, group, accumulation, inTps, outTps, inMsg24Hour, outMsg24Hour}]}
(``group`` null for a topic without consumers, ``outTps``/``outMsg24Hour`` null then).
"""

from __future__ import annotations

from typing import Any

from rmqwire.admin.core import MASTER_ID
from rmqwire.admin.javautil import hashmap_order
from rmqwire.cli.base import Env, command, emit_json, opt, out
from rmqwire.cli.javafmt import front, printf
from rmqwire.codec.commands.admin import BrokerStatsData

#: ``Stats`` names of the broker's statistics.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"


def sum_24_hours(bsd: BrokerStatsData) -> int:
    """``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the minute's."""
    for item in (bsd.stats_day, bsd.stats_hour, bsd.stats_minute):
        if item is not None and item.sum != 0:
            return item.sum
    return 0


def _topic_rows(env: Env, topic: str, active_only: bool) -> list[dict[str, Any]]:
    admin = env.admin
    route = admin.examine_topic_route_info(topic)
    groups = admin.query_topic_consume_by_who(topic)
    masters = [m for m in ((bd.broker_addrs or {}).get(MASTER_ID) for bd in route.broker_datas or [])
               if m is not None]
    in_tps, in_today = 0.0, 0
    for addr in masters:
        try:
            bsd = admin.view_broker_stats_data(addr, TOPIC_PUT_NUMS, topic)
        except Exception:  # no stats yet: mqadmin counts nothing for this broker
            continue
        in_tps += bsd.stats_minute.tps if bsd.stats_minute else 0.0
        in_today += sum_24_hours(bsd)
    rows = []
    group_list = hashmap_order(groups.group_list or []) if groups else []
    for group in group_list:
        out_tps, out_today = 0.0, 0
        for addr in masters:
            try:
                bsd = admin.view_broker_stats_data(addr, GROUP_GET_NUMS, f"{topic}@{group}")
            except Exception:
                continue
            out_tps += bsd.stats_minute.tps if bsd.stats_minute else 0.0
            out_today += sum_24_hours(bsd)
        accumulate = 0
        try:
            stats = admin.examine_consume_stats(group, topic)
            accumulate = max(0, sum(o.broker_offset - o.consumer_offset
                                    for o in (stats.offset_table or {}).values()))
        except Exception:
            pass
        if not active_only or in_today > 0 or out_today > 0:
            rows.append({"topic": topic, "group": group, "accumulation": accumulate,
                         "inTps": in_tps, "outTps": out_tps, "inMsg24Hour": in_today,
                         "outMsg24Hour": out_today})
    if not group_list and (not active_only or in_today > 0):
        rows.append({"topic": topic, "group": None, "accumulation": 0, "inTps": in_tps,
                     "outTps": None, "inMsg24Hour": in_today, "outMsg24Hour": None})
    return rows


@command("statsAll", "Topic and Consumer tps stats.")
@opt("-a", "--activeTopic", "active", "print active topic only", flag=True)
@opt("-t", "--topic", "topic", "print select topic only")
def stats_all(env: Env, active: bool, topic: str | None) -> None:
    topics = [t for t in hashmap_order(env.admin.fetch_all_topic_list().topic_list or [])
              if not t.startswith("%RETRY%") and not t.startswith("%DLQ%")
              and (not topic or t == topic)]
    if not env.json:
        out(printf("%-64s  %-64s %12s %11s %11s %14s %14s%n", "#Topic", "#Consumer Group",
                   "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"))
    rows = []
    with env.progress_bar("statsAll", len(topics)) as advance:
        for t in topics:
            try:
                found = _topic_rows(env, t, active)
            except Exception:  # mqadmin skips a topic it cannot examine
                found = []
            rows.extend(found)
            advance(1)
            if env.json:
                continue
            for r in found:
                if r["group"] is None:
                    out(printf("%-64s  %-64s %12d %11.2f %11s %14d %14s%n", front(t, 64), "", 0,
                               r["inTps"], "", r["inMsg24Hour"], "NO_CONSUMER"))
                else:
                    out(printf("%-64s  %-64s %12d %11.2f %11.2f %14d %14d%n", front(t, 64),
                               front(r["group"], 64), r["accumulation"], r["inTps"], r["outTps"],
                               r["inMsg24Hour"], r["outMsg24Hour"]))
    if env.json:
        emit_json({"rows": rows})
