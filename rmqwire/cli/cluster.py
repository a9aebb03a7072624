"""Cluster and broker commands: clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig,
brokerConsumeStats, cleanExpiredCQ, deleteExpiredCommitLog.

JSON documents: ``clusterList`` {"brokers": [{cluster, brokerName, brokerId, addr, version,
inTps, outTps, ..., runtime}]} (``-m``: {"brokers": [{cluster, brokerName, inTotalYest,
outTotalYest, inTotalToday, outTotalToday}]}); ``brokerStatus`` {"brokers": {addr: {key: value}}};
``getBrokerConfig`` {"brokers": [{addr, role, master, config: {key: value}}]};
``brokerConsumeStats`` {"rows": [...], "diffTotal"}; the mutating commands {"brokers": [addr...],
"success": bool}.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rmqwire.admin.core import MASTER_ID, all_addrs_of_cluster, master_addrs_of_cluster
from rmqwire.admin.javautil import concurrent_hashmap_order, hashmap_order
from rmqwire.cli.base import CommandFailed, Env, command, emit_json, opt, out, parse_bool
from rmqwire.cli.javafmt import JFloat, fixed, format_date, front, printf
from rmqwire.codec.commands.route import ClusterInfo

#: ``CommandUtil.ERROR_MESSAGE`` (printed without a line break, as mqadmin does).
CLUSTER_ERROR = ("[error] Make sure the specified clusterName exists or the name server connected "
                 "to is correct.")


def cluster_names(info: ClusterInfo) -> list[str]:
    """``clusterAddrTable.keySet()`` of the ClusterInfo mqadmin decodes (a HashMap)."""
    return hashmap_order(info.cluster_addr_table or {})


def broker_ids(addrs: dict[int, str]) -> list[int]:
    """``BrokerData.brokerAddrs`` is a ``HashMap<Long, String>``."""
    return hashmap_order(addrs)


def masters_and_slaves(info: ClusterInfo, cluster: str) -> list[str] | None:
    """``CommandUtil.fetchMasterAndSlaveAddrByClusterName``: a HashSet of every address."""
    if cluster not in (info.cluster_addr_table or {}):
        return None
    return hashmap_order(all_addrs_of_cluster(info, cluster))


def master_set(info: ClusterInfo, cluster: str) -> list[str] | None:
    """``CommandUtil.fetchMasterAddrByClusterName``: a HashSet of the masters."""
    masters = master_addrs_of_cluster(info, cluster)
    return None if masters is None else hashmap_order(masters)


# ---- clusterList -------------------------------------------------------------------------------


@command("clusterList", "List cluster infos.")
@opt("-m", "--moreStats", "more_stats", "Print more stats", flag=True)
@opt("-i", "--interval", "interval", "specify intervals numbers, it is in seconds")
@opt("-c", "--clusterName", "cluster", "which cluster")
@opt("", "--watch", "watch", "Repeat every SECONDS (mqadmin's -i)", metavar="SECONDS")
def cluster_list(env: Env, more_stats: bool, interval: str | None, cluster: str | None,
                 watch: str | None) -> None:
    every = interval or watch
    period = float(every) if every else None
    first = True
    while True:
        if not first:
            time.sleep(period or 1)
        first = False
        info = env.admin.examine_broker_cluster_info()
        names = [cluster] if cluster else cluster_names(info)
        rows = (_more_stats if more_stats else _base_info)(env, info, names)
        if env.json:
            emit_json({"brokers": rows})
        if period is None:
            return
        sys.stdout.flush()


def _brokers(info: ClusterInfo, names: list[str]):
    for cluster in names:
        for broker_name in sorted((info.cluster_addr_table or {}).get(cluster) or []):
            bd = (info.broker_addr_table or {}).get(broker_name)
            if bd is None:
                continue
            addrs = bd.broker_addrs or {}
            for bid in broker_ids(addrs):
                yield cluster, broker_name, bid, addrs[bid]


def _runtime(env: Env, addr: str) -> dict[str, str] | Exception:
    try:
        return env.admin.fetch_broker_runtime_stats(addr)
    except Exception as e:  # mqadmin prints the trace and shows the broker with empty stats
        return e


def _more_stats(env: Env, info: ClusterInfo, names: list[str]) -> list[dict[str, Any]]:
    if not env.json:
        out(printf("%-16s  %-32s %14s %14s %14s %14s%n", "#Cluster Name", "#Broker Name",
                   "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday"))
    rows = []
    for cluster, broker_name, bid, addr in _brokers(info, names):
        kv = _runtime(env, addr)
        totals = [0, 0, 0, 0]
        if isinstance(kv, dict):
            try:
                put = [int(kv[k]) for k in ("msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning",
                                           "msgPutTotalTodayNow")]
                get = [int(kv[k]) for k in ("msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning",
                                           "msgGetTotalTodayNow")]
                totals = [put[1] - put[0], get[1] - get[0], put[2] - put[1], get[2] - get[1]]
            except (KeyError, ValueError):
                pass
        rows.append({"cluster": cluster, "brokerName": broker_name, "brokerId": bid,
                     "addr": addr, "inTotalYest": totals[0], "outTotalYest": totals[1],
                     "inTotalToday": totals[2], "outTotalToday": totals[3]})
        if not env.json:
            out(printf("%-16s  %-32s %14d %14d %14d %14d%n", cluster, broker_name, *totals))
    return rows


def _first_number(text: str | None) -> float:
    if text and text.strip():
        return float(text.split(" ")[0])
    return 0.0


def _base_info(env: Env, info: ClusterInfo, names: list[str]) -> list[dict[str, Any]]:
    if not env.json:
        out(printf("%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s%n",
                   "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
                   "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE",
                   "#ACTIVATED"))
    rows = []
    for cluster, broker_name, bid, addr in _brokers(info, names):
        kv = _runtime(env, addr)
        t = kv if isinstance(kv, dict) else {}
        if not isinstance(kv, dict):
            sys.stderr.write(f"rmqadmin clusterList: runtime stats of {addr}: {kv}\n")
        # Java's locals start as "" / 0 and keep those when the stats call failed.
        get = t.get if t else (lambda k, d="": "")
        timer = [0, 0, 0]
        tps = [JFloat(0.0), JFloat(0.0)]
        try:
            timer = [int(t["timerReadBehind"]), int(t["timerOffsetBehind"]),
                     int(t["timerCongestNum"])]
            tps = [JFloat(float(t["timerEnqueueTps"])), JFloat(float(t["timerDequeueTps"]))]
        except (KeyError, ValueError):
            pass
        try:
            tin = _first_number(t.get("putTps"))
            tout = _first_number(t.get("getTransferredTps"))
        except ValueError:
            tin = tout = 0.0
        hour = space = 0.0
        earliest = t.get("earliestMessageTimeStamp")
        if earliest:
            hour = (time.time_ns() // 1_000_000 - int(earliest)) / 1000.0 / 60.0 / 60.0
        ratio = t.get("commitLogDiskRatio")
        if ratio:
            space = float(ratio)
        send_q, send_w = get("sendThreadPoolQueueSize"), get("sendThreadPoolQueueHeadWaitTimeMills")
        pull_q, pull_w = get("pullThreadPoolQueueSize"), get("pullThreadPoolQueueHeadWaitTimeMills")
        ack_q = t.get("ackThreadPoolQueueSize", "N") if t else ""
        ack_w = t.get("ackThreadPoolQueueHeadWaitTimeMills", "N") if t else ""
        version = t.get("brokerVersionDesc") if t else ""
        active = t.get("brokerActive", "").lower() == "true"
        pc_wait = t.get("pageCacheLockTimeMills") if t else ""
        congest = JFloat(timer[2]) / JFloat(10000.0)
        rows.append({
            "cluster": cluster, "brokerName": broker_name, "brokerId": bid, "addr": addr,
            "version": version, "inTps": tin, "outTps": tout,
            "sendThreadPoolQueueSize": send_q, "sendThreadPoolQueueHeadWaitTimeMills": send_w,
            "pullThreadPoolQueueSize": pull_q, "pullThreadPoolQueueHeadWaitTimeMills": pull_w,
            "ackThreadPoolQueueSize": ack_q, "ackThreadPoolQueueHeadWaitTimeMills": ack_w,
            "timerReadBehind": timer[0], "timerOffsetBehind": timer[1],
            "timerCongestNum": timer[2], "timerEnqueueTps": float(tps[0]),
            "timerDequeueTps": float(tps[1]), "pageCacheLockTimeMills": pc_wait,
            "hours": hour, "commitLogDiskRatio": space, "activated": active,
        })
        if env.json:
            continue
        out(printf(
            "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10s%n",
            cluster, broker_name, bid, addr, version,
            printf("%9.2f(%s,%sms)", tin, send_q, send_w),
            printf("%9.2f(%s,%sms|%s,%sms)", tout, pull_q, pull_w, ack_q, ack_w),
            printf("%d-%d(%.1fw, %.1f, %.1f)", timer[0], timer[1], congest, tps[0], tps[1]),
            pc_wait, fixed(hour, 2), fixed(space, 4), active,
        ))
    return rows


# ---- brokerStatus ------------------------------------------------------------------------------


@command("brokerStatus", "Fetch broker runtime status data.")
@opt("-b", "--brokerAddr", "broker_addr", "Broker address")
@opt("-c", "--clusterName", "cluster", "which cluster")
def broker_status(env: Env, broker_addr: str | None, cluster: str | None) -> None:
    if bool(broker_addr) == bool(cluster):
        raise CommandFailed("give exactly one of -b/--brokerAddr and -c/--clusterName")
    doc: dict[str, dict[str, str]] = {}
    if broker_addr:
        table = env.admin.fetch_broker_runtime_stats(broker_addr)
        doc[broker_addr] = dict(sorted(table.items()))
        if not env.json:
            for k, v in sorted(table.items()):
                out(printf("%-32s: %s%n", k, v))
    else:
        info = env.admin.examine_broker_cluster_info()
        addrs = masters_and_slaves(info, cluster)
        if addrs is None:
            if not env.json:
                out(CLUSTER_ERROR)
            addrs = []
        for addr in addrs:
            try:
                table = env.admin.fetch_broker_runtime_stats(addr)
            except Exception as e:  # mqadmin prints the trace and goes on with the next broker
                sys.stderr.write(f"rmqadmin brokerStatus: {addr}: {e}\n")
                continue
            doc[addr] = dict(sorted(table.items()))
            if not env.json:
                for k, v in sorted(table.items()):
                    out(printf("%-24s %-32s: %s%n", addr, k, v))
    if env.json:
        emit_json({"brokers": doc})


# ---- getBrokerConfig / updateBrokerConfig ------------------------------------------------------


def java_properties_order(config: dict[str, str]) -> list[str]:
    """The order a ``java.util.Properties`` loaded from the text iterates its keys."""
    return concurrent_hashmap_order(config, 8)


@command("getBrokerConfig", "Get broker config by cluster or special broker.")
@opt("-b", "--brokerAddr", "broker_addr", "get which broker")
@opt("-c", "--clusterName", "cluster", "get which cluster")
def get_broker_config(env: Env, broker_addr: str | None, cluster: str | None) -> None:
    brokers: list[dict[str, Any]] = []

    def show(prefix: str, addr: str, role: str, master: str | None) -> None:
        if not env.json:
            out(prefix)
        if addr == "NO_MASTER":
            return
        config = env.admin.get_broker_config(addr)
        keys = java_properties_order(config)
        brokers.append({"addr": addr, "role": role, "master": master,
                        "config": {k: config[k] for k in keys}})
        if not env.json:
            for k in keys:
                out(printf("%-50s=  %s\n", k, config[k]))
            out("\n")

    if broker_addr:
        show(f"============{broker_addr}============\n", broker_addr, "broker", None)
    elif cluster:
        info = env.admin.examine_broker_cluster_info()
        names = (info.cluster_addr_table or {}).get(cluster)
        if names is None:
            if not env.json:
                out(CLUSTER_ERROR)
            names = []
        # CommandUtil.fetchMasterAndSlaveDistinguish: HashMap(4) master -> slaves
        table: dict[str, list[str]] = {}
        for name in names:
            bd = (info.broker_addr_table or {}).get(name)
            if bd is None or bd.broker_addrs is None:
                continue
            master = bd.broker_addrs.get(MASTER_ID)
            key = master if master is not None else "NO_MASTER"
            if master is None:
                table.setdefault(key, [])
            else:
                table[key] = []
            for bid in broker_ids(bd.broker_addrs):
                if bid != MASTER_ID and bd.broker_addrs[bid] is not None:
                    table[key].append(bd.broker_addrs[bid])
        for master in hashmap_order(table, 4):
            show(f"============Master: {master}============\n", master, "master", None)
            for slave in table[master]:
                show(f"============My Master: {master}=====Slave: {slave}============\n",
                     slave, "slave", master)
    if env.json:
        emit_json({"brokers": brokers})


@command("updateBrokerConfig", "Update broker's config")
@opt("-b", "--brokerAddr", "broker_addr", "update which broker")
@opt("-c", "--clusterName", "cluster", "update which cluster")
@opt("-a", "--updateAllBroker", "all_brokers", "update all brokers include slave")
@opt("-k", "--key", "key", "config key", required=True)
@opt("-v", "--value", "value", "config value", required=True)
def update_broker_config(env: Env, broker_addr: str | None, cluster: str | None,
                         all_brokers: str | None, key: str, value: str) -> None:
    props = {key: value}
    done: list[str] = []
    if broker_addr:
        env.admin.update_broker_config(broker_addr, props)
        done.append(broker_addr)
        if not env.json:
            out(f"update broker config success, {broker_addr}\n")
    elif cluster:
        info = env.admin.examine_broker_cluster_info()
        addrs = masters_and_slaves(info, cluster) if all_brokers is not None else master_set(info, cluster)
        if addrs is None:
            if not env.json:
                out(CLUSTER_ERROR)
            addrs = []
        for addr in addrs:
            try:
                env.admin.update_broker_config(addr, props)
            except Exception as e:  # mqadmin prints the trace and goes on
                sys.stderr.write(f"rmqadmin updateBrokerConfig: {addr}: {e}\n")
                continue
            done.append(addr)
            if not env.json:
                out(f"update broker config success, {addr}\n")
    else:
        raise CommandFailed("give -b/--brokerAddr or -c/--clusterName")
    if env.json:
        emit_json({"brokers": done, "key": key, "value": value})


# ---- brokerConsumeStats ------------------------------------------------------------------------


@command("brokerConsumeStats", "Fetch broker consume stats data.")
@opt("-b", "--brokerAddr", "broker_addr", "Broker address", required=True)
@opt("-t", "--timeoutMillis", "timeout_millis", "request timeout Millis")
@opt("-l", "--level", "level", "threshold of print diff")
@opt("-o", "--order", "order", "order topic")
def broker_consume_stats(env: Env, broker_addr: str, timeout_millis: str | None,
                         level: str | None, order: str | None) -> None:
    timeout = int(timeout_millis) / 1000 if timeout_millis else 50.0
    diff_level = int(level) if level else 0
    stats = env.admin.fetch_consume_stats_in_broker(broker_addr, parse_bool(order), timeout)
    if not env.json:
        out(printf("%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s%n", "#Topic", "#Group",
                   "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                   "#LastTime"))
    rows = []
    for by_group in stats.consume_stats_list or []:
        for group, consume_stats in by_group.items():
            for cs in consume_stats:
                table = cs.offset_table or {}
                for mq in sorted(table):
                    ow = table[mq]
                    diff = ow.broker_offset - ow.consumer_offset
                    if diff < diff_level or ow.last_timestamp <= 0:
                        continue
                    rows.append({"topic": mq.topic, "group": group, "brokerName": mq.broker_name,
                                 "queueId": mq.queue_id, "brokerOffset": ow.broker_offset,
                                 "consumerOffset": ow.consumer_offset, "diff": diff,
                                 "lastTimestamp": ow.last_timestamp})
                    if not env.json:
                        out(printf("%-64s  %-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s%n",
                                   front(mq.topic, 64), group, front(mq.broker_name, 32),
                                   mq.queue_id, ow.broker_offset, ow.consumer_offset, diff,
                                   format_date(ow.last_timestamp)))
    if env.json:
        emit_json({"rows": rows, "diffTotal": stats.total_diff})
    else:
        out(printf("%nDiff Total: %d%n", stats.total_diff))


# ---- cleanExpiredCQ / deleteExpiredCommitLog ---------------------------------------------------


@command("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.")
@opt("-b", "--brokerAddr", "broker_addr", "Broker address")
@opt("-c", "--cluster", "cluster", "clustername")
def clean_expired_cq(env: Env, broker_addr: str | None, cluster: str | None) -> None:
    result = env.admin.clean_expired_consumer_queue(cluster or None, broker_addr or None)
    _chore_result(env, result)


@command("deleteExpiredCommitLog", "Delete expired CommitLog files")
@opt("-b", "--brokerAddr", "broker_addr", "Broker address")
@opt("-c", "--cluster", "cluster", "clustername")
def delete_expired_commit_log(env: Env, broker_addr: str | None, cluster: str | None) -> None:
    result = env.admin.delete_expired_commit_log(cluster or None, broker_addr or None)
    _chore_result(env, result)


def _chore_result(env: Env, result: bool) -> None:
    if env.json:
        emit_json({"success": result})
    else:
        out("success" if result else "false")
