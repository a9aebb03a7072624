"""Consumer, producer and offset commands: updateSubGroup, deleteSubGroup, getConsumerConfig,
consumerProgress, consumerConnection, producerConnection, consumerStatus, cloneGroupOffset,
resetOffsetByTime.

JSON documents: ``consumerProgress -g`` {"queues": [{topic, brokerName, queueId, brokerOffset,
consumerOffset, clientIp, diff, inflight, lastTimestamp}], consumeTps, diffTotal, inflightTotal};
without ``-g`` {"groups": [{group, count, version, type, model, tps, diffTotal}]};
``consumerConnection`` {"connections": [...], "subscriptions": [...], consumeType, messageModel,
consumeFromWhere}; ``producerConnection`` {"connections": [...]}; ``consumerStatus`` {"clients":
[...], subscriptionSame, rebalanceOk} (``-i``: the ConsumerRunningInfo tree);
``getConsumerConfig`` {"brokers": [{cluster, brokerName, config}]}; ``resetOffsetByTime``
{"mode": "broker"|"tool"|"queue", "offsets": [...]}.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqwire.admin.core import RETRY_GROUP_TOPIC_PREFIX, select_broker_addr
from rmqwire.admin.javautil import (
    concurrent_hashmap_order,
    hashmap_order,
    hashmap_putall_order,
)
from rmqwire.cli.base import (
    CommandFailed,
    Env,
    command,
    emit_json,
    opt,
    out,
    parse_bool,
    parse_int,
)
from rmqwire.cli.cluster import CLUSTER_ERROR, master_set
from rmqwire.cli.javafmt import (
    format_date,
    front,
    jstr,
    map_str,
    parse_timestamp,
    printf,
    version_desc,
)
from rmqwire.cli.topic import parse_attributes
from rmqwire.codec import fastjson
from rmqwire.codec.codes import V5_0_0, ResponseCode
from rmqwire.codec.commands.admin import SubscriptionGroupConfig
from rmqwire.codec.commands.consumer import ConsumerRunningInfo
from rmqwire.errors import BrokerResponseError, RequestCodeNotSupportedError
from rmqwire.model import ConsumeType, MessageQueue

#: ``CustomizedRetryPolicy``'s default delays and ``ExponentialRetryPolicy``'s defaults.
DEFAULT_NEXT = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000,
                480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000]
EXPONENTIAL_DEFAULTS = {"initial": 5000, "max": 7200000, "multiplier": 2}


# ---- toString of the Java beans mqadmin prints -------------------------------------------------


def retry_policy_str(p: Any) -> str:
    """``GroupRetryPolicy.toString`` (Guava toStringHelper)."""
    if not isinstance(p, dict):
        return "null" if p is None else str(p)
    exp, cust = p.get("exponentialRetryPolicy"), p.get("customizedRetryPolicy")
    exp_s = "null" if exp is None else (
        f"ExponentialRetryPolicy{{initial={exp.get('initial')}, max={exp.get('max')}, "
        f"multiplier={exp.get('multiplier')}}}")
    cust_s = "null" if cust is None else (
        "CustomizedRetryPolicy{next=[" + ", ".join(str(n) for n in cust.get("next") or []) + "]}")
    return (f"GroupRetryPolicy{{type={p.get('type', 'CUSTOMIZED')}, exponentialRetryPolicy="
            f"{exp_s}, customizedRetryPolicy={cust_s}}}")


def normalize_retry_policy(text: str) -> dict[str, Any]:
    """``JSON.parseObject(text, GroupRetryPolicy.class)``: what Java keeps of the JSON."""
    try:
        raw = fastjson.loads(text)
    except Exception as e:
        raise CommandFailed(f"-p/--groupRetryPolicy is not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise CommandFailed("-p/--groupRetryPolicy must be a JSON object")
    policy: dict[str, Any] = {"type": str(raw.get("type", "CUSTOMIZED"))}
    if policy["type"] not in ("CUSTOMIZED", "EXPONENTIAL"):
        raise CommandFailed(f"unknown retry policy type {policy['type']!r}")
    if isinstance(raw.get("exponentialRetryPolicy"), dict):
        exp = raw["exponentialRetryPolicy"]
        policy["exponentialRetryPolicy"] = {k: int(exp.get(k, v)) for k, v in EXPONENTIAL_DEFAULTS.items()}
    if isinstance(raw.get("customizedRetryPolicy"), dict):
        nxt = raw["customizedRetryPolicy"].get("next", DEFAULT_NEXT)
        policy["customizedRetryPolicy"] = {"next": [int(n) for n in nxt]}
    return policy


def subscription_group_str(c: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString``."""
    subs = "null" if c.subscription_data_set is None else "[" + ", ".join(
        f"SimpleSubscriptionData{{topic={s.topic}, expressionType={s.expression_type}, "
        f"expression={s.expression}, version={s.version}}}" for s in c.subscription_data_set) + "]"
    return ("SubscriptionGroupConfig{"
            f"groupName={c.group_name}, consumeEnable={jstr(c.consume_enable)}, "
            f"consumeFromMinEnable={jstr(c.consume_from_min_enable)}, "
            f"consumeBroadcastEnable={jstr(c.consume_broadcast_enable)}, "
            f"consumeMessageOrderly={jstr(c.consume_message_orderly)}, "
            f"retryQueueNums={c.retry_queue_nums}, retryMaxTimes={c.retry_max_times}, "
            f"groupRetryPolicy={retry_policy_str(c.group_retry_policy)}, brokerId={c.broker_id}, "
            f"whichBrokerWhenConsumeSlowly={c.which_broker_when_consume_slowly}, "
            f"notifyConsumerIdsChangedEnable={jstr(c.notify_consumer_ids_changed_enable)}, "
            f"groupSysFlag={c.group_sys_flag}, consumeTimeoutMinute={c.consume_timeout_minute}, "
            f"subscriptionDataSet={subs}, attributes={map_str(c.attributes or {})}}}")


def subscription_group_fields(c: SubscriptionGroupConfig) -> list[tuple[str, str]]:
    """getConsumerConfig: each declared field and its ``toString`` ("" for null)."""
    subs = "" if c.subscription_data_set is None else "[" + ", ".join(
        f"SimpleSubscriptionData{{topic={s.topic}, expressionType={s.expression_type}, "
        f"expression={s.expression}, version={s.version}}}" for s in c.subscription_data_set) + "]"
    return [
        ("groupName", "" if c.group_name is None else c.group_name),
        ("consumeEnable", jstr(c.consume_enable)),
        ("consumeFromMinEnable", jstr(c.consume_from_min_enable)),
        ("consumeBroadcastEnable", jstr(c.consume_broadcast_enable)),
        ("consumeMessageOrderly", jstr(c.consume_message_orderly)),
        ("retryQueueNums", str(c.retry_queue_nums)),
        ("retryMaxTimes", str(c.retry_max_times)),
        ("groupRetryPolicy", "" if c.group_retry_policy is None
         else retry_policy_str(c.group_retry_policy)),
        ("brokerId", str(c.broker_id)),
        ("whichBrokerWhenConsumeSlowly", str(c.which_broker_when_consume_slowly)),
        ("notifyConsumerIdsChangedEnable", jstr(c.notify_consumer_ids_changed_enable)),
        ("groupSysFlag", str(c.group_sys_flag)),
        ("consumeTimeoutMinute", str(c.consume_timeout_minute)),
        ("subscriptionDataSet", subs),
        ("attributes", "" if c.attributes is None else map_str(c.attributes)),
    ]


#: The fields 4.9.7's SubscriptionGroupConfig declares.
V4_SUBSCRIPTION_GROUP_FIELDS = frozenset((
    "groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable", "retryQueueNums",
    "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable"))


def _v4_subscription_group_fields(c: SubscriptionGroupConfig) -> list[tuple[str, str]]:
    return [(n, v) for n, v in subscription_group_fields(c) if n in V4_SUBSCRIPTION_GROUP_FIELDS]


# ---- updateSubGroup / deleteSubGroup / getConsumerConfig ---------------------------------------


@command("updateSubGroup", "Update or create subscription group.")
@opt("-b", "--brokerAddr", "broker_addr", "create subscription group to which broker")
@opt("-c", "--clusterName", "cluster", "create subscription group to which cluster")
@opt("-g", "--groupName", "group", "consumer group name", required=True)
@opt("-s", "--consumeEnable", "consume_enable", "consume enable")
@opt("-m", "--consumeFromMinEnable", "from_min", "from min offset")
@opt("-d", "--consumeBroadcastEnable", "broadcast", "broadcast")
@opt("-o", "--consumeMessageOrderly", "orderly", "consume message orderly")
@opt("-q", "--retryQueueNums", "retry_queues", "retry queue nums")
@opt("-r", "--retryMaxTimes", "retry_max", "retry max times")
@opt("-p", "--groupRetryPolicy", "retry_policy", "the json string of retry policy")
@opt("-i", "--brokerId", "broker_id", "consumer from which broker id")
@opt("-w", "--whichBrokerWhenConsumeSlowly", "slow_broker", "which broker id when consume slowly")
@opt("-a", "--notifyConsumerIdsChanged", "notify", "notify consumerId changed")
@opt("", "--attributes", "attributes", "attribute(+a=b,+c=d,-e)")
def update_sub_group(env: Env, broker_addr: str | None, cluster: str | None, group: str,
                     consume_enable: str | None, from_min: str | None, broadcast: str | None,
                     orderly: str | None, retry_queues: str | None, retry_max: str | None,
                     retry_policy: str | None, broker_id: str | None, slow_broker: str | None,
                     notify: str | None, attributes: str | None) -> None:
    c = SubscriptionGroupConfig(group_name=group, consume_broadcast_enable=False,
                                consume_from_min_enable=False)
    if consume_enable is not None:
        c.consume_enable = parse_bool(consume_enable)
    if from_min is not None:
        c.consume_from_min_enable = parse_bool(from_min)
    if broadcast is not None:
        c.consume_broadcast_enable = parse_bool(broadcast)
    if orderly is not None:
        c.consume_message_orderly = parse_bool(orderly)
    if retry_queues is not None:
        c.retry_queue_nums = parse_int(retry_queues, "-q/--retryQueueNums")
    if retry_max is not None:
        c.retry_max_times = parse_int(retry_max, "-r/--retryMaxTimes")
    if retry_policy is not None:
        c.group_retry_policy = normalize_retry_policy(retry_policy)
    if broker_id is not None:
        c.broker_id = parse_int(broker_id, "-i/--brokerId")
    if slow_broker is not None:
        c.which_broker_when_consume_slowly = parse_int(slow_broker, "-w/--whichBrokerWhenConsumeSlowly")
    if notify is not None:
        c.notify_consumer_ids_changed_enable = parse_bool(notify)
    if attributes is not None:
        c.attributes = parse_attributes(attributes)
    done: list[str] = []
    if broker_addr:
        env.admin.create_and_update_subscription_group_config(broker_addr, c)
        done.append(broker_addr)
        if not env.json:
            out(printf("create subscription group to %s success.%n", broker_addr))
    elif cluster:
        info = env.admin.examine_broker_cluster_info()
        masters = master_set(info, cluster)
        if masters is None:
            if not env.json:
                out(CLUSTER_ERROR)
            masters = []
        for addr in masters:
            try:
                env.admin.create_and_update_subscription_group_config(addr, c)
            except Exception as e:  # mqadmin prints the trace and goes on
                sys.stderr.write(f"rmqadmin updateSubGroup: {addr}: {e}\n")
                continue
            done.append(addr)
            if not env.json:
                out(printf("create subscription group to %s success.%n", addr))
    else:
        raise CommandFailed("give -b/--brokerAddr or -c/--clusterName")
    if env.json:
        emit_json({"brokers": done, "subscriptionGroupConfig": c.to_fastjson()})
    else:
        out(subscription_group_str(c))


@command("deleteSubGroup", "Delete subscription group from broker.")
@opt("-b", "--brokerAddr", "broker_addr", "delete subscription group from which broker")
@opt("-c", "--clusterName", "cluster", "delete subscription group from which cluster")
@opt("-g", "--groupName", "group", "subscription group name", required=True)
@opt("-r", "--removeOffset", "remove_offset", "remove offset")
def delete_sub_group(env: Env, broker_addr: str | None, cluster: str | None, group: str,
                     remove_offset: str | None) -> None:
    clean = parse_bool(remove_offset)
    done: list[str] = []
    if broker_addr:
        env.admin.delete_subscription_group(broker_addr, group, clean)
        done.append(broker_addr)
        if not env.json:
            out(printf("delete subscription group [%s] from broker [%s] success.%n", group,
                       broker_addr))
    elif cluster:
        info = env.admin.examine_broker_cluster_info()
        masters = master_set(info, cluster)
        if masters is None:
            if not env.json:
                out(CLUSTER_ERROR)
            masters = []
        for addr in masters:
            env.admin.delete_subscription_group(addr, group, clean)
            done.append(addr)
            if not env.json:
                out(printf("delete subscription group [%s] from broker [%s] in cluster [%s] "
                           "success.%n", group, addr, cluster))
        try:  # the group's retry and dead-letter topics go too
            env.admin.delete_topic(RETRY_GROUP_TOPIC_PREFIX + group, cluster)
            env.admin.delete_topic("%DLQ%" + group, cluster)
        except Exception as e:
            sys.stderr.write(f"rmqadmin deleteSubGroup: deleting the group's topics: {e}\n")
    else:
        raise CommandFailed("give -b/--brokerAddr or -c/--clusterName")
    if env.json:
        emit_json({"group": group, "brokers": done, "removeOffset": clean})


@command("getConsumerConfig", "Get consumer config by subscription group name.")
@opt("-g", "--groupName", "group", "subscription group name", required=True)
def get_consumer_config(env: Env, group: str) -> None:
    info = env.admin.examine_broker_cluster_info()
    clusters = info.cluster_addr_table or {}
    found = []
    for broker_name in hashmap_order(info.broker_addr_table or {}):
        cluster = next((c for c in hashmap_order(clusters) if broker_name in clusters[c]), None)
        addr = select_broker_addr(info.broker_addr_table[broker_name])
        try:
            config = env.admin.examine_subscription_group_config(addr, group)
            fields = subscription_group_fields
        except RequestCodeNotSupportedError:
            # A 4.9.7 broker has no GET_SUBSCRIPTIONGROUP_CONFIG: 4.9.7's mqadmin takes the group
            # from all of them and prints its own SubscriptionGroupConfig's fields.
            table = env.admin.get_all_subscription_group(addr).subscription_group_table or {}
            config, fields = table.get(group), _v4_subscription_group_fields
        if config is not None:
            found.append((cluster, broker_name, config, fields))
    if env.json:
        emit_json({"brokers": [{"cluster": c, "brokerName": b, "config": cfg.to_fastjson()}
                               for c, b, cfg, _ in found]})
        return
    for cluster, broker_name, config, fields in found:
        out(f"============================={jstr(cluster)}:{broker_name}============================="
            "\n")
        for name, value in fields(config):
            out(printf("%s%-40s=  %s\n", "", name, value))


# ---- consumerProgress --------------------------------------------------------------------------


def parse_group(retry_topic: str) -> str:
    """``KeyBuilder.parseGroup``: the group of a retry topic (POP v2 retry topics too)."""
    body = retry_topic[len(RETRY_GROUP_TOPIC_PREFIX):]
    if "+" in retry_topic:
        parts = retry_topic.split("+")
        if len(parts) == 2:
            return parts[0][len(RETRY_GROUP_TOPIC_PREFIX):]
    return body


@command("consumerProgress", "Query consumer's progress, speed.")
@opt("-g", "--groupName", "group", "consumer group name")
@opt("-t", "--topicName", "topic", "topic name")
@opt("-s", "--showClientIP", "show_client_ip", "Show Client IP per Queue")
@opt("-c", "--cluster", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route.")
@opt("", "--watch", "watch", "Repeat every SECONDS", metavar="SECONDS")
def consumer_progress(env: Env, group: str | None, topic: str | None, show_client_ip: str | None,
                      cluster: str | None, watch: str | None) -> None:
    while True:
        if group:
            _group_progress(env, group, topic, parse_bool(show_client_ip), cluster)
        else:
            _all_groups(env)
        if not watch:
            return
        sys.stdout.flush()
        time.sleep(float(watch))


def _allocation(env: Env, group: str) -> dict[MessageQueue, str]:
    result: dict[MessageQueue, str] = {}
    try:
        cc = env.admin.examine_consumer_connection_info(group)
        for conn in cc.connection_set or []:
            info = env.admin.get_consumer_running_info(group, conn.client_id, False)
            for mq in (info.mq_table or {}) if info else {}:
                result[mq] = conn.client_id.split("@")[0]
    except Exception:  # mqadmin logs it and shows N/A
        pass
    return result


@dataclass(frozen=True)
class ProgressText:
    """How one mqadmin prints consumerProgress -g: the same rows, then these columns after
    #Diff (``%`` formats, with and without a client IP column before #Diff) and this footer."""

    header_tail: str
    row_tail: str
    inflight: bool
    diff_total: str


#: 5.3.3's mqadmin: an Inflight column (pullOffset - consumerOffset) and its total.
PROGRESS_TEXT = ProgressText("%-20s %-20s%s%n", "%-20d %-20d %s%n", True, "Consume Diff Total")
#: 4.9.7's: a 4.x broker sends no pullOffset, and 5.3.3's mqadmin fails against it (its consume
#: stats ask GET_TOPIC_CONFIG, which 4.x lacks), so rmqadmin prints what 4.9.7's prints.
PROGRESS_TEXT_V4 = ProgressText("%-20s  %s%n", "%-20d  %s%n", False, "Diff Total")


def _group_progress(env: Env, group: str, topic: str | None, show_ip: bool,
                    cluster: str | None) -> None:
    stats = env.admin.examine_consume_stats(group, topic, cluster)
    table = stats.offset_table or {}
    ips = _allocation(env, group) if show_ip else {}
    text = PROGRESS_TEXT_V4 if 0 < stats.broker_version < V5_0_0 else PROGRESS_TEXT
    head, row_head, ip_col = ("%-64s  %-32s  %-4s  %-20s  %-20s  ", "%-64s  %-32s  %-4d  %-20d  %-20d  ",
                              "%-20s " if show_ip else "")
    if not env.json:
        titles = ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
                  *(["#Client IP"] if show_ip else []), "#Diff",
                  *(["#Inflight"] if text.inflight else []), "#LastTime"]
        out(printf(head + ip_col + text.header_tail, *titles))
    diff_total = inflight_total = 0
    rows = []
    for mq in sorted(table):
        ow = table[mq]
        diff = ow.broker_offset - ow.consumer_offset
        inflight = ow.pull_offset - ow.consumer_offset if text.inflight else None
        diff_total += diff
        inflight_total += inflight or 0
        last = "N/A" if ow.last_timestamp == 0 else format_date(ow.last_timestamp)
        ip = ips.get(mq)
        rows.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                     "brokerOffset": ow.broker_offset, "consumerOffset": ow.consumer_offset,
                     "clientIp": ip, "diff": diff, "inflight": inflight,
                     "lastTimestamp": ow.last_timestamp})
        if env.json:
            continue
        out(printf(row_head + ip_col + text.row_tail, front(mq.topic, 64), front(mq.broker_name, 32),
                   mq.queue_id, ow.broker_offset, ow.consumer_offset,
                   *([ip if ip is not None else "N/A"] if show_ip else []), diff,
                   *([inflight] if text.inflight else []), last))
    if env.json:
        emit_json({"group": group, "queues": rows, "consumeTps": stats.consume_tps,
                   "diffTotal": diff_total,
                   "inflightTotal": inflight_total if text.inflight else None})
        return
    out("\n")
    out(printf("Consume TPS: %.2f%n", stats.consume_tps))
    out(printf(f"{text.diff_total}: %d%n", diff_total))
    if text.inflight:
        out(printf("Consume Inflight Total: %d%n", inflight_total))


def _all_groups(env: Env) -> None:
    if not env.json:
        out(printf("%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s%n", "#Group", "#Count", "#Version",
                   "#Type", "#Model", "#TPS", "#Diff Total"))
    rows = []
    for topic in hashmap_order(env.admin.fetch_all_topic_list().topic_list or []):
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            continue
        group = parse_group(topic)
        stats = cc = None
        try:
            stats = env.admin.examine_consume_stats(group)
        except Exception:
            pass
        try:
            cc = env.admin.examine_consumer_connection_info(group)
        except Exception:
            pass
        count = len(cc.connection_set or []) if cc else 0
        tps = int(stats.consume_tps) if stats else 0
        diff = sum(o.broker_offset - o.consumer_offset
                   for o in (stats.offset_table or {}).values()) if stats else 0
        version = min((c.version for c in cc.connection_set), default=2**31 - 1) if cc else 0
        ctype = cc.consume_type if cc else None
        model = cc.message_model if cc else None
        type_desc = ("PULL" if ctype == ConsumeType.CONSUME_ACTIVELY else "PUSH") if count else ""
        model_desc = model.name if count and ctype == ConsumeType.CONSUME_PASSIVELY and model else ""
        version_s = version_desc(version) if count else "OFFLINE"
        rows.append({"group": group, "count": count, "version": version_s if count else None,
                     "type": type_desc or None, "model": model_desc or None, "tps": tps,
                     "diffTotal": diff})
        if not env.json:
            out(printf("%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d%n", front(group, 64), count,
                       version_s, type_desc, model_desc, tps, diff))
    if env.json:
        emit_json({"groups": rows})


# ---- consumerConnection / producerConnection ---------------------------------------------------


def _connection_doc(c: Any) -> dict[str, Any]:
    return {"clientId": c.client_id, "clientAddr": c.client_addr,
            "language": c.language.name if c.language else None,
            "version": version_desc(c.version)}


@command("consumerConnection", "Query consumer's socket connection, client version and subscription.")
@opt("-g", "--consumerGroup", "group", "consumer group name", required=True)
@opt("-b", "--brokerAddr", "broker_addr", "broker address")
def consumer_connection(env: Env, group: str, broker_addr: str | None) -> None:
    cc = env.admin.examine_consumer_connection_info(group, broker_addr or None)
    subs = cc.subscription_table or {}
    # a ConcurrentHashMap decoded by fastjson (16 bins at first)
    order = concurrent_hashmap_order(subs, presized=False)
    if env.json:
        emit_json({
            "group": group,
            "connections": [_connection_doc(c) for c in cc.connection_set or []],
            "subscriptions": [{"topic": subs[t].topic, "subExpression": subs[t].sub_string}
                              for t in order],
            "consumeType": cc.consume_type, "messageModel": cc.message_model,
            "consumeFromWhere": cc.consume_from_where,
        })
        return
    out(printf("%-36s %-22s %-10s %s%n", "#ClientId", "#ClientAddr", "#Language", "#Version"))
    for c in cc.connection_set or []:
        out(printf("%-36s %-22s %-10s %s%n", c.client_id, c.client_addr, c.language,
                   version_desc(c.version)))
    out(printf("%nBelow is subscription:\n"))
    out(printf("%-20s %s%n", "#Topic", "#SubExpression"))
    for t in order:
        out(printf("%-20s %s%n", subs[t].topic, subs[t].sub_string))
    out("\n")
    out(printf("ConsumeType: %s%n", cc.consume_type))
    out(printf("MessageModel: %s%n", cc.message_model))
    out(printf("ConsumeFromWhere: %s%n", cc.consume_from_where))


@command("producerConnection", "Query producer's socket connection and client version.")
@opt("-g", "--producerGroup", "group", "producer group name", required=True)
@opt("-t", "--topic", "topic", "topic name", required=True)
def producer_connection(env: Env, group: str, topic: str) -> None:
    pc = env.admin.examine_producer_connection_info(group, topic)
    if env.json:
        emit_json({"group": group, "connections": [_connection_doc(c) for c in pc.connection_set]})
        return
    for i, c in enumerate(pc.connection_set or [], 1):
        out(printf("%04d  %-32s %-22s %-8s %s%n", i, c.client_id, c.client_addr, c.language,
                   version_desc(c.version)))


# ---- consumerStatus ----------------------------------------------------------------------------


def human_time(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: local ``yyyyMMddHHmmssSSS``."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


def running_info_text(info: ConsumerRunningInfo) -> str:
    """``ConsumerRunningInfo.formatString``."""
    parts = ["#Consumer Properties#\n"]
    props = info.properties or {}
    for k in concurrent_hashmap_order(props, 8):  # a java.util.Properties decoded by fastjson
        parts.append(printf("%-40s: %s%n", k, jstr(props[k])))
    parts.append("\n\n#Consumer Subscription#\n")
    for i, sd in enumerate(info.subscription_set or [], 1):
        parts.append(printf("%03d Topic: %-40s ClassFilter: %-8s SubExpression: %s%n", i, sd.topic,
                            sd.class_filter_mode, sd.sub_string))
    mq_table = info.mq_table or {}
    parts.append("\n\n#Consumer Offset#\n")
    parts.append(printf("%-64s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID",
                        "#Consumer Offset"))
    for mq in sorted(mq_table):
        parts.append(printf("%-32s  %-32s  %-4d  %-20d%n", mq.topic, mq.broker_name, mq.queue_id,
                            mq_table[mq].commit_offset))
    parts.append("\n\n#Consumer MQ Detail#\n")
    parts.append(printf("%-64s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID",
                        "#ProcessQueueInfo"))
    for mq in sorted(mq_table):
        pq = mq_table[mq]
        text = (f"ProcessQueueInfo [commitOffset={pq.commit_offset}, cachedMsgMinOffset="
                f"{pq.cached_msg_min_offset}, cachedMsgMaxOffset={pq.cached_msg_max_offset}, "
                f"cachedMsgCount={pq.cached_msg_count}, cachedMsgSizeInMiB={pq.cached_msg_size_in_mib}, "
                f"transactionMsgMinOffset={pq.transaction_msg_min_offset}, transactionMsgMaxOffset="
                f"{pq.transaction_msg_max_offset}, transactionMsgCount={pq.transaction_msg_count}, "
                f"locked={jstr(pq.locked)}, tryUnlockTimes={pq.try_unlock_times}, lastLockTimestamp="
                f"{human_time(pq.last_lock_timestamp)}, droped={jstr(pq.droped)}, lastPullTimestamp="
                f"{human_time(pq.last_pull_timestamp)}, lastConsumeTimestamp="
                f"{human_time(pq.last_consume_timestamp)}]")
        parts.append(printf("%-64s  %-32s  %-4d  %s%n", mq.topic, mq.broker_name, mq.queue_id, text))
    parts.append("\n\n#Consumer Pop Detail#\n")
    parts.append(printf("%-32s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID",
                        "#ProcessQueueInfo"))
    pop = info.mq_pop_table or {}
    for mq in sorted(pop):
        p = pop[mq] if isinstance(pop[mq], dict) else {}
        text = (f"PopProcessQueueInfo [waitAckCount:{p.get('waitAckCount', 0)}, droped:"
                f"{jstr(bool(p.get('droped', False)))}, lastPopTimestamp:{p.get('lastPopTimestamp', 0)}]")
        parts.append(printf("%-32s  %-32s  %-4d  %s%n", mq.topic, mq.broker_name, mq.queue_id, text))
    parts.append("\n\n#Consumer RT&TPS#\n")
    parts.append(printf("%-64s  %14s %14s %14s %14s %18s %25s%n", "#Topic", "#Pull RT", "#Pull TPS",
                        "#Consume RT", "#ConsumeOK TPS", "#ConsumeFailed TPS",
                        "#ConsumeFailedMsgsInHour"))
    status = info.status_table or {}
    for topic in sorted(status):
        s = status[topic]
        parts.append(printf("%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d%n", topic, s.pull_rt,
                            s.pull_tps, s.consume_rt, s.consume_ok_tps, s.consume_failed_tps,
                            s.consume_failed_msgs))
    if info.user_consumer_info is not None:
        parts.append("\n\n#User Consume Info#\n")
        for k in sorted(info.user_consumer_info):
            parts.append(printf("%-40s: %s%n", k, info.user_consumer_info[k]))
    if info.jstack is not None:
        parts.append("\n\n#Consumer jstack#\n")
        parts.append(info.jstack)
    return "".join(parts)


def running_info_doc(info: ConsumerRunningInfo) -> dict[str, Any]:
    """The running info as JSON: the queue-keyed tables become lists with the queue inside."""
    tree = info.to_fastjson()
    for name in ("mqTable", "mqPopTable"):
        table = getattr(info, "mq_table" if name == "mqTable" else "mq_pop_table") or {}
        tree[name] = [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                       "info": value.to_fastjson() if hasattr(value, "to_fastjson") else value}
                      for mq, value in sorted(table.items())]
    return tree


def _is_push(info: ConsumerRunningInfo) -> bool:
    return str((info.properties or {}).get("PROP_CONSUME_TYPE")) == ConsumeType.CONSUME_PASSIVELY.name


def _analyze_process_queue(client_id: str, info: ConsumerRunningInfo) -> str:
    """``ConsumerRunningInfo.analyzeProcessQueue``."""
    if not _is_push(info):
        return ""
    orderly = str((info.properties or {}).get("PROP_CONSUMEORDERLY")).lower() == "true"
    now = time.time_ns() // 1_000_000
    text = []
    for mq in sorted(info.mq_table or {}):
        pq = info.mq_table[mq]
        if orderly:
            if not pq.locked:
                text.append(f"{client_id} {mq} can't lock for a while, {now - pq.last_lock_timestamp}ms\n")
            elif pq.droped and pq.try_unlock_times > 0:
                text.append(f"{client_id} {mq} unlock {pq.try_unlock_times} times, still failed\n")
        else:
            diff = now - pq.last_consume_timestamp
            if diff > 60_000 and pq.cached_msg_count > 0:
                text.append(f"{client_id} {mq} can't consume for a while, maybe blocked, {diff}ms\n")
    return "".join(text)


def _subscription_same(infos: dict[str, ConsumerRunningInfo]) -> bool:
    """``ConsumerRunningInfo.analyzeSubscription``."""
    first = infos[min(infos)]
    start = (first.properties or {}).get("PROP_CONSUMER_START_TIMESTAMP")
    try:
        started_a_while = time.time_ns() // 1_000_000 - int(str(start)) > 120_000
    except ValueError:
        started_a_while = False
    if _is_push(first) and started_a_while:
        def key(i: ConsumerRunningInfo) -> list[tuple[Any, ...]]:
            return [(s.topic, s.sub_string, tuple(s.tags_set or []), s.class_filter_mode,
                     s.expression_type) for s in i.subscription_set or []]
        return all(key(i) == key(first) for i in infos.values())
    return True


@command("consumerStatus", "Query consumer's internal data structure.")
@opt("-g", "--consumerGroup", "group", "consumer group name", required=True)
@opt("-i", "--clientId", "client_id", "The consumer's client id")
@opt("-b", "--brokerAddr", "broker_addr", "broker address")
@opt("-s", "--jstack", "jstack", "Run jstack command in the consumer progress", flag=True)
def consumer_status(env: Env, group: str, client_id: str | None, broker_addr: str | None,
                    jstack: bool) -> None:
    cc = env.admin.examine_consumer_connection_info(group, broker_addr or None)
    if client_id:
        info = env.admin.get_consumer_running_info(group, client_id, jstack)
        if env.json:
            emit_json({"group": group, "clientId": client_id,
                       "runningInfo": running_info_doc(info) if info else None})
        elif info is not None:
            out(running_info_text(info))
        return
    now = time.time_ns() // 1_000_000
    if not env.json:
        out(printf("%-10s %-40s %-20s %s%n", "#Index", "#ClientId", "#Version",
                   "#ConsumerRunningInfoFile"))
    infos: dict[str, ConsumerRunningInfo] = {}
    clients = []
    for conn in cc.connection_set or []:
        try:
            info = env.admin.get_consumer_running_info(group, conn.client_id, jstack)
        except Exception as e:  # mqadmin prints the trace and goes on with the next client
            sys.stderr.write(f"rmqadmin consumerStatus: {conn.client_id}: {e}\n")
            continue
        if info is None:
            continue
        infos[conn.client_id] = info
        path = f"{now}/{conn.client_id}"
        # MixAll.string2FileNotSafe: the file under the working directory, as mqadmin writes it
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(running_info_text(info), encoding="utf-8")
        clients.append({"clientId": conn.client_id, "version": version_desc(conn.version),
                        "file": path})
        if not env.json:
            out(printf("%-10d %-40s %-20s %s%n", len(clients), conn.client_id,
                       version_desc(conn.version), path))
    same = rebalance_ok = None
    analysis = ""
    if infos:
        same = _subscription_same(infos)
        rebalance_ok = same
        if same:
            analysis = "".join(_analyze_process_queue(cid, infos[cid]) for cid in sorted(infos))
    if env.json:
        emit_json({"group": group, "clients": clients, "subscriptionSame": same,
                   "rebalanceOk": rebalance_ok, "analysis": analysis.splitlines()})
        return
    if infos:
        if same:
            out(printf("%n%nSame subscription in the same group of consumer"))
            out(printf("%n%nRebalance %s%n", "OK" if rebalance_ok else "Failed"))
            out(analysis)
        else:
            out(printf("%n%nWARN: Different subscription in the same group of consumer!!!"))


# ---- cloneGroupOffset / resetOffsetByTime ------------------------------------------------------


@command("cloneGroupOffset", "Clone offset from other group.")
@opt("-s", "--srcGroup", "src_group", "set source consumer group", required=True)
@opt("-d", "--destGroup", "dest_group", "set destination consumer group", required=True)
@opt("-t", "--topic", "topic", "set the topic", required=True)
@opt("-o", "--offline", "offline", "the group or the topic is offline")
def clone_group_offset(env: Env, src_group: str, dest_group: str, topic: str,
                       offline: str | None) -> None:
    admin = env.admin
    stats = admin.examine_consume_stats(src_group)
    table = stats.offset_table or {}
    cloned = []
    if table:
        route = admin.examine_topic_route_info(topic)
        for mq in hashmap_order(table):  # Java iterates the ConcurrentHashMap's key set
            addr = None
            for bd in route.broker_datas or []:
                if bd.broker_name == mq.broker_name:
                    addr = select_broker_addr(bd)
                    break
            offset = table[mq].consumer_offset
            if offset >= 0:
                if addr is None:
                    raise CommandFailed(f"broker {mq.broker_name} is not in the route of {topic}")
                admin.update_consume_offset(addr, dest_group, mq, offset)
                cloned.append({"topic": mq.topic, "brokerName": mq.broker_name,
                               "queueId": mq.queue_id, "offset": offset})
    if env.json:
        emit_json({"srcGroup": src_group, "destGroup": dest_group, "topic": topic,
                   "offsets": cloned})
    else:
        out(printf("clone group offset success. srcGroup[%s], destGroup=[%s], topic[%s]",
                   src_group, dest_group, topic))


@command("resetOffsetByTime", "Reset consumer offset by timestamp(without client restart).")
@opt("-g", "--group", "group", "set the consumer group", required=True)
@opt("-t", "--topic", "topic", "set the topic", required=True)
@opt("-s", "--timestamp", "timestamp", "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]",
     required=True)
@opt("-f", "--force", "force", "set the force rollback by timestamp switch[true|false]. Deprecated.")
@opt("-b", "--broker", "broker", "broker addr")
@opt("-q", "--queue", "queue", "queue id")
@opt("-o", "--offset", "offset", "Expect queue offset, not support old version broker")
@opt("-c", "--cluster", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route.")
def reset_offset_by_time(env: Env, group: str, topic: str, timestamp: str, force: str | None,
                         broker: str | None, queue: str | None, offset: str | None,
                         cluster: str | None) -> None:
    admin = env.admin
    try:
        ts = time.time_ns() // 1_000_000 if timestamp == "now" else parse_timestamp(timestamp)
    except ValueError as e:
        raise CommandFailed(str(e)) from None
    is_force = parse_bool(force) if force is not None else True
    queue_id = parse_int(queue, "-q/--queue") if queue is not None else -1
    if broker is not None and queue_id >= 0:
        if not env.json:
            out(printf("start reset consumer offset by specified, group[%s], topic[%s], queueId[%s], "
                       "broker[%s], timestamp(string)[%s], timestamp(long)[%s]%n", group, topic,
                       queue_id, broker, timestamp, ts))
        if offset is not None:
            reset = parse_int(offset, "-o/--offset")
        else:
            reset = admin.search_offset_on(broker, topic, queue_id, ts, 3.0)
        if not env.json:
            out(printf("reset consumer offset to %d%n", reset))
        if reset > 0:
            admin.reset_offset_by_queue_id(broker, group, topic, queue_id, reset)
        if env.json:
            emit_json({"mode": "queue", "group": group, "topic": topic, "timestamp": ts,
                       "offsets": [{"brokerAddr": broker, "queueId": queue_id, "offset": reset}]})
        return
    try:
        table = admin.reset_offset_by_timestamp(topic, group, ts, is_force, cluster or None,
                                                cluster is not None)
    except BrokerResponseError as e:
        if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        _reset_old(env, group, topic, ts, is_force, timestamp, cluster)
        return
    # Java merges each broker's answer (a HashMap) into a new HashMap with putAll.
    by_broker: dict[str, list[MessageQueue]] = {}
    for mq in table:
        by_broker.setdefault(mq.broker_name, []).append(mq)
    rows = [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": table[mq]}
            for mq in hashmap_putall_order(by_broker.values())]
    if env.json:
        emit_json({"mode": "broker", "group": group, "topic": topic, "force": is_force,
                   "timestamp": ts, "offsets": rows})
        return
    out(printf("start reset consumer offset by specified, group[%s], topic[%s], force[%s], "
               "timestamp(string)[%s], timestamp(long)[%s]%n", group, topic, is_force, timestamp, ts))
    out(printf("%-40s  %-40s  %-40s%n", "#brokerName", "#queueId", "#offset"))
    for row in rows:
        out(printf("%-40s  %-40d  %-40d%n", front(row["brokerName"], 32), row["queueId"],
                   row["offset"]))


def _reset_old(env: Env, group: str, topic: str, ts: int, force: bool, text: str,
               cluster: str | None) -> None:
    """``ResetOffsetByTimeOldCommand.resetOffset``: no consumer online, the tool writes offsets."""
    with env.progress_bar(f"reset {group} on {topic}", None) as advance:
        stats = env.admin.reset_offset_by_timestamp_old(group, topic, ts, force, cluster or None,
                                                        progress=advance)
    if env.json:
        emit_json({"mode": "tool", "group": group, "topic": topic, "force": force, "timestamp": ts,
                   "offsets": [{"brokerName": s.broker_name, "queueId": s.queue_id,
                                "brokerOffset": s.broker_offset,
                                "consumerOffset": s.consumer_offset,
                                "timestampOffset": s.timestamp_offset,
                                "resetOffset": s.rollback_offset} for s in stats]})
        return
    out(printf("reset consumer offset by specified consumerGroup[%s], topic[%s], force[%s], "
               "timestamp(string)[%s], timestamp(long)[%s]%n", group, topic, force, text, ts))
    out(printf("%-20s  %-20s  %-20s  %-20s  %-20s  %-20s%n", "#brokerName", "#queueId",
               "#brokerOffset", "#consumerOffset", "#timestampOffset", "#resetOffset"))
    for s in stats:
        out(printf("%-20s  %-20d  %-20d  %-20d  %-20d  %-20d%n", front(s.broker_name, 32),
                   s.queue_id, s.broker_offset, s.consumer_offset, s.timestamp_offset,
                   s.rollback_offset))
