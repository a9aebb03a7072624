"""Topic commands: updateTopic, deleteTopic, updateTopicPerm, topicRoute, topicStatus,
topicClusterList, topicList, updateOrderConf, allocateMQ.

JSON documents: ``topicList`` {"topics": [...]} (``-c``: {"rows": [{cluster, topic, group}]});
``topicRoute`` the TopicRouteData tree (``brokerDatas``, ``queueDatas``, ...); ``topicStatus``
{"queues": [{brokerName, queueId, minOffset, maxOffset, lastUpdateTimestamp}], "topicPutTps"};
``topicClusterList`` {"clusters": [...]}; ``allocateMQ`` {"result": {ip: [queue...]}}; the
mutating commands {"topicConfig": {...}, "brokers": [...]} and the like.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rmqwire.admin.core import MASTER_ID, NAMESPACE_ORDER_TOPIC_CONFIG, subscribe_queues
from rmqwire.admin.javautil import hashmap_order
from rmqwire.cli.base import CommandFailed, Env, command, emit_json, opt, out, parse_bool, parse_int
from rmqwire.cli.cluster import CLUSTER_ERROR, master_set
from rmqwire.cli.javafmt import front, human_time2, jstr, map_str, pretty_json, printf
from rmqwire.codec import fastjson
from rmqwire.codec.commands.topic import TopicConfig
from rmqwire.errors import BrokerResponseError
from rmqwire.model import MessageQueue, TopicFilterType

RETRY = "%RETRY%"
DLQ = "%DLQ%"
#: ``TopicSysFlag``.
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


def perm_str(perm: int) -> str:
    """``PermName.perm2String``: ``RW-`` style."""
    return (("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-"))


def topic_config_str(tc: TopicConfig) -> str:
    """``TopicConfig.toString``."""
    ftype = tc.topic_filter_type.name if tc.topic_filter_type else "null"
    return (f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
            f"writeQueueNums={tc.write_queue_nums}, perm={perm_str(tc.perm)}, topicFilterType="
            f"{ftype}, topicSysFlag={tc.topic_sys_flag}, order={jstr(tc.order)}, attributes="
            f"{map_str(tc.attributes or {})}]")


def topic_config_doc(tc: TopicConfig) -> dict[str, Any]:
    return tc.to_fastjson()


def parse_attributes(text: str) -> dict[str, str]:
    """``AttributeParser.parseToMap``: ``+a=b,+c=d,-e`` (a HashMap: printed in its order)."""
    attrs: dict[str, str] = {}
    for kv in text.split(","):
        if not kv:
            continue
        if "=" in kv:
            key, value = kv.split("=")[0], kv.split("=")[1]
            if "+" not in key:
                raise CommandFailed(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise CommandFailed(f"delete attribute format is wrong: {key}")
        if key in attrs:
            raise CommandFailed(f"key duplication: {key}")
        attrs[key] = value
    return {k: attrs[k] for k in hashmap_order(attrs)}


# ---- topicList ---------------------------------------------------------------------------------


@command("topicList", "Fetch all topic list from name server.")
@opt("-c", "--clusterModel", "cluster_model", "clusterModel", flag=True)
def topic_list(env: Env, cluster_model: bool) -> None:
    admin = env.admin
    if not cluster_model:
        topics = hashmap_order(admin.fetch_all_topic_list().topic_list or [])
        if env.json:
            emit_json({"topics": topics})
        else:
            out("".join(f"{t}\n" for t in topics))
        return
    info = admin.examine_broker_cluster_info()
    if not env.json:
        out(printf("%-20s  %-48s  %-48s%n", "#Cluster Name", "#Topic", "#Consumer Group"))
    rows = []
    for topic in hashmap_order(admin.fetch_all_topic_list().topic_list or []):
        if topic.startswith(RETRY) or topic.startswith(DLQ):
            continue
        cluster: str | None = ""
        groups: list[str] = []
        try:
            route = admin.examine_topic_route_info(topic)
            name = route.broker_datas[0].broker_name
            cluster = None
            for c in hashmap_order(info.cluster_addr_table or {}):
                if name in info.cluster_addr_table[c]:
                    cluster = c
                    break
            groups = hashmap_order(admin.query_topic_consume_by_who(topic).group_list or [])
        except Exception:  # mqadmin skips what it cannot learn about a topic
            pass
        for group in groups or [""]:
            rows.append({"cluster": cluster, "topic": topic, "group": group})
            if not env.json:
                out(printf("%-20s  %-64s  %-64s%n", front(cluster, 20), front(topic, 64),
                           front(group, 64)))
    if env.json:
        emit_json({"rows": rows})


# ---- topicRoute --------------------------------------------------------------------------------


@command("topicRoute", "Examine topic route info.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-l", "--list", "as_list", "Use list format to print data", flag=True)
def topic_route(env: Env, topic: str, as_list: bool) -> None:
    route = env.admin.examine_topic_route_info(topic)
    if env.json:
        emit_json(_json_tree(route.to_fastjson()))
        return
    if not as_list:
        out(pretty_json(route.to_fastjson()) + "\n")
        return
    fmt = "%-45s %-32s %-50s %-10s %-11s %-5s%n"
    queues = {q.broker_name: q for q in route.queue_datas or []}
    out(printf(fmt, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue",
               "#Perm"))
    total_read = total_write = 0
    for bd in sorted(route.broker_datas or [], key=lambda b: b.broker_name or ""):
        qd = queues[bd.broker_name]
        total_read += qd.read_queue_nums
        total_write += qd.write_queue_nums
        addrs = {k: bd.broker_addrs[k] for k in hashmap_order(bd.broker_addrs or {})}
        out(printf(fmt, bd.cluster, bd.broker_name, map_str(addrs), qd.read_queue_nums,
                   qd.write_queue_nums, qd.perm))
    out("-" * 158 + "\n")
    out(printf(fmt, "Total:", len(queues), "", total_read, total_write, ""))


def _json_tree(tree: Any) -> Any:
    """A fastjson tree as standard JSON (numeric map keys become strings)."""
    if isinstance(tree, dict):
        return {str(k): _json_tree(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_json_tree(v) for v in tree]
    return tree


# ---- topicStatus -------------------------------------------------------------------------------


@command("topicStatus", "Examine topic Status info.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-c", "--cluster", "cluster", "cluster name or lmq parent topic, lmq is used to find the route.")
@opt("", "--watch", "watch", "Repeat every SECONDS", metavar="SECONDS")
def topic_status(env: Env, topic: str, cluster: str | None, watch: str | None) -> None:
    while True:
        _topic_status_once(env, topic, cluster)
        if not watch:
            return
        sys.stdout.flush()
        time.sleep(float(watch))


def _topic_status_once(env: Env, topic: str, cluster: str | None) -> None:
    admin = env.admin
    if cluster:
        from rmqwire.admin.core import select_broker_addr
        from rmqwire.codec.commands.topic import TopicStatsTable

        stats = TopicStatsTable()
        route = admin.examine_topic_route_info(cluster)
        for bd in route.broker_datas or []:
            addr = select_broker_addr(bd)
            if addr is not None:
                stats.offset_table.update(admin.examine_topic_stats(topic, addr).offset_table or {})
    else:
        stats = admin.examine_topic_stats(topic)
    table = stats.offset_table or {}
    rows = []
    if not env.json:
        out(printf("%-32s  %-4s  %-20s  %-20s    %s%n", "#Broker Name", "#QID", "#Min Offset",
                   "#Max Offset", "#Last Updated"))
    for mq in sorted(table):
        to = table[mq]
        rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                     "minOffset": to.min_offset, "maxOffset": to.max_offset,
                     "lastUpdateTimestamp": to.last_update_timestamp})
        if not env.json:
            when = human_time2(to.last_update_timestamp) if to.last_update_timestamp > 0 else ""
            out(printf("%-32s  %-4d  %-20d  %-20d    %s%n", front(mq.broker_name, 32), mq.queue_id,
                       to.min_offset, to.max_offset, when))
    if env.json:
        emit_json({"topic": topic, "queues": rows, "topicPutTps": stats.topic_put_tps})
    else:
        out("\n")
        out(printf("Topic Put TPS: %s%n", stats.topic_put_tps))


# ---- topicClusterList --------------------------------------------------------------------------


@command("topicClusterList", "Get cluster info for topic.")
@opt("-t", "--topic", "topic", "topic name", required=True)
def topic_cluster_list(env: Env, topic: str) -> None:
    clusters = hashmap_order(env.admin.get_topic_cluster_list(topic))
    if env.json:
        emit_json({"topic": topic, "clusters": clusters})
    else:
        out("".join(f"{c}\n" for c in clusters))


# ---- allocateMQ --------------------------------------------------------------------------------


def allocate_averagely(mqs: list[MessageQueue], cid: str, cids: list[str]) -> list[MessageQueue]:
    """``AllocateMessageQueueAveragely.allocate`` (no sorting: the lists as given)."""
    if cid not in cids:
        return []
    index = cids.index(cid)
    mod = len(mqs) % len(cids)
    if len(mqs) <= len(cids):
        size = 1
    elif mod > 0 and index < mod:
        size = len(mqs) // len(cids) + 1
    else:
        size = len(mqs) // len(cids)
    start = index * size if (mod > 0 and index < mod) else index * size + mod
    rng = min(size, len(mqs) - start)
    return [mqs[(start + i) % len(mqs)] for i in range(rng)]


@command("allocateMQ", "Allocate MQ.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-i", "--ipList", "ip_list", "ipList", required=True)
def allocate_mq(env: Env, topic: str, ip_list: str) -> None:
    ips = [ip for ip in ip_list.split(",")]
    while ips and ips[-1] == "":  # String.split drops trailing empty strings
        ips.pop()
    route = env.admin.examine_topic_route_info(topic)
    # topicRouteData2TopicSubscribeInfo fills a HashSet; the allocation takes its order.
    mqs = hashmap_order(subscribe_queues(topic, route))
    result: dict[str, list[MessageQueue]] = {}
    for ip in ips:
        result[ip] = allocate_averagely(mqs, ip, ips)
    ordered = {ip: result[ip] for ip in hashmap_order(result)}
    tree = {"result": {ip: [{"brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "topic": mq.topic} for mq in queues]
                       for ip, queues in ordered.items()}}
    if env.json:
        emit_json(tree)
    else:
        out(fastjson.dumps(tree, standard=False) + "\n")


# ---- updateTopic / deleteTopic / updateTopicPerm -----------------------------------------------


@command("updateTopic", "Update or create topic.")
@opt("-b", "--brokerAddr", "broker_addr", "create topic to which broker")
@opt("-c", "--clusterName", "cluster", "create topic to which cluster")
@opt("-a", "--attributes", "attributes", "attribute(+a=b,+c=d,-e)")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-r", "--readQueueNums", "read", "set read queue nums")
@opt("-w", "--writeQueueNums", "write", "set write queue nums")
@opt("-p", "--perm", "perm", "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]")
@opt("-o", "--order", "order", "set topic's order(true|false)")
@opt("-u", "--unit", "unit", "is unit topic (true|false)")
@opt("-s", "--hasUnitSub", "has_unit_sub", "has unit sub (true|false)")
def update_topic(env: Env, broker_addr: str | None, cluster: str | None, attributes: str | None,
                 topic: str, read: str | None, write: str | None, perm: str | None,
                 order: str | None, unit: str | None, has_unit_sub: str | None) -> None:
    if bool(broker_addr) == bool(cluster):
        raise CommandFailed("give exactly one of -b/--brokerAddr and -c/--clusterName")
    tc = TopicConfig(topic_name=topic, read_queue_nums=8, write_queue_nums=8,
                     topic_filter_type=TopicFilterType.SINGLE_TAG)
    if attributes is not None:
        tc.attributes = parse_attributes(attributes)
    if read is not None:
        tc.read_queue_nums = parse_int(read, "-r/--readQueueNums")
    if write is not None:
        tc.write_queue_nums = parse_int(write, "-w/--writeQueueNums")
    if perm is not None:
        tc.perm = parse_int(perm, "-p/--perm")
    tc.topic_sys_flag = (FLAG_UNIT if parse_bool(unit) else 0) | (
        FLAG_UNIT_SUB if parse_bool(has_unit_sub) else 0)
    tc.order = parse_bool(order)
    admin = env.admin
    done: list[str] = []
    order_conf = None
    if broker_addr:
        admin.create_and_update_topic_config(broker_addr, tc)
        done.append(broker_addr)
        if tc.order:
            info = admin.examine_broker_cluster_info()
            name = next((n for n in hashmap_order(info.broker_addr_table or {})
                         if broker_addr in (info.broker_addr_table[n].broker_addrs or {}).values()),
                        None)
            if name is None:
                raise CommandFailed("Make sure the specified clusterName exists or the name server "
                                    "connected to is correct.")
            order_conf = f"{name}:{tc.write_queue_nums}"
            admin.create_or_update_order_conf(topic, order_conf, False)
            if not env.json:
                out(printf("%s%n", f"set broker orderConf. isOrder={jstr(True)}, orderConf=[{order_conf}]"))
        if not env.json:
            out(printf("create topic to %s success.%n", broker_addr))
            out(printf("%s%n", topic_config_str(tc)))
    else:
        info = admin.examine_broker_cluster_info()
        masters = master_set(info, cluster)
        if masters is None:
            if not env.json:
                out(CLUSTER_ERROR)
            masters = []
        for addr in masters:
            admin.create_and_update_topic_config(addr, tc)
            done.append(addr)
            if not env.json:
                out(printf("create topic to %s success.%n", addr))
        if tc.order:
            names = (info.cluster_addr_table or {}).get(cluster)
            if not names:
                raise CommandFailed("Make sure the specified clusterName exists or the name server "
                                    "connected to is correct.")
            order_conf = ";".join(f"{n}:{tc.write_queue_nums}" for n in hashmap_order(names))
            admin.create_or_update_order_conf(topic, order_conf, True)
            if not env.json:
                out(printf("set cluster orderConf. isOrder=%s, orderConf=[%s]%n", True, order_conf))
        if not env.json:
            out(printf("%s%n", topic_config_str(tc)))
    if env.json:
        emit_json({"brokers": done, "topicConfig": topic_config_doc(tc), "orderConf": order_conf})


@command("deleteTopic", "Delete topic from broker and NameServer.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-c", "--clusterName", "cluster", "delete topic from which cluster", required=True)
def delete_topic(env: Env, topic: str, cluster: str) -> None:
    admin = env.admin
    info = admin.examine_broker_cluster_info()
    masters = master_set(info, cluster)
    if masters is None:
        if not env.json:
            out(CLUSTER_ERROR)
        masters = []
    admin.delete_topic_in_broker(masters, topic)
    if not env.json:
        out(printf("delete topic [%s] from cluster [%s] success.%n", topic, cluster))
    admin.delete_topic_in_name_server(hashmap_order(env.namesrv_list), topic, cluster)
    if env.json:
        emit_json({"topic": topic, "cluster": cluster, "brokers": masters,
                   "nameServers": env.namesrv_list})
    else:
        out(printf("delete topic [%s] from NameServer success.%n", topic))


@command("updateTopicPerm", "Update topic perm.")
@opt("-b", "--brokerAddr", "broker_addr", "create topic to which broker")
@opt("-c", "--clusterName", "cluster", "create topic to which cluster")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-p", "--perm", "perm", "set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]", required=True)
def update_topic_perm(env: Env, broker_addr: str | None, cluster: str | None, topic: str,
                      perm: str) -> None:
    admin = env.admin
    route = admin.examine_topic_route_info(topic)
    if not route.queue_datas:
        raise CommandFailed(f"topic {topic} has no queues in its route")
    qd0 = route.queue_datas[0]
    new_perm = parse_int(perm, "-p/--perm")
    tc = TopicConfig(topic_name=topic, write_queue_nums=qd0.write_queue_nums,
                     read_queue_nums=qd0.read_queue_nums, topic_sys_flag=qd0.topic_sys_flag,
                     perm=new_perm, topic_filter_type=TopicFilterType.SINGLE_TAG)
    doc: dict[str, Any] = {"topic": topic, "perm": new_perm, "updated": []}
    if broker_addr:
        name = None
        for bd in route.broker_datas or []:
            addrs = bd.broker_addrs or {}
            if any(a == broker_addr and bid == MASTER_ID for bid, a in addrs.items()):
                name = bd.broker_name
                break
        if name is None:
            if env.json:
                raise CommandFailed(f"broker {broker_addr} does not exist or is not a master")
            out(printf("updateTopicPerm error broker not exit or broker is not master!.%n"))
            return
        old = 0
        for qd in route.queue_datas:
            if qd.broker_name == name:
                old = qd.perm
                if new_perm == old:
                    if env.json:
                        emit_json({**doc, "oldPerm": old})
                    else:
                        out(printf("new perm equals to the old one!%n"))
                    return
                break
        admin.create_and_update_topic_config(broker_addr, tc)
        doc["updated"].append({"addr": broker_addr, "oldPerm": old})
        if env.json:
            emit_json(doc)
        else:
            out(printf("update topic perm from %s to %s in %s success.%n", old, new_perm, broker_addr))
            out(printf("%s.%n", topic_config_str(tc)))
    elif cluster:
        info = admin.examine_broker_cluster_info()
        masters = master_set(info, cluster)
        if masters is None:
            if not env.json:
                out(CLUSTER_ERROR)
            masters = []
        for addr in masters:
            admin.create_and_update_topic_config(addr, tc)
            doc["updated"].append({"addr": addr, "oldPerm": qd0.perm})
            if not env.json:
                out(printf("update topic perm from %s to %s in %s success.%n", qd0.perm, new_perm,
                           addr))
        if env.json:
            emit_json(doc)
    else:
        raise CommandFailed("give -b/--brokerAddr or -c/--clusterName")


# ---- updateOrderConf ---------------------------------------------------------------------------


@command("updateOrderConf", "Create or update or delete order conf.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-v", "--orderConf", "order_conf", "set order conf [eg. brokerName1:num;brokerName2:num]")
@opt("-m", "--method", "method", "option type [eg. put|get|delete", required=True)
def update_order_conf(env: Env, topic: str, order_conf: str | None, method: str) -> None:
    admin = env.admin
    if method == "get":
        try:
            conf = admin.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        except BrokerResponseError as e:
            raise CommandFailed(f"no order conf of topic {topic}: {e}") from None
        if env.json:
            emit_json({"topic": topic, "orderConf": conf})
        else:
            out(printf("get orderConf success. topic=[%s], orderConf=[%s] ", topic, conf))
    elif method == "put":
        if not (order_conf or "").strip():
            raise CommandFailed("please set orderConf with option -v.")
        admin.create_or_update_order_conf(topic, order_conf, True)
        if env.json:
            emit_json({"topic": topic, "orderConf": order_conf})
        else:
            out(printf("update orderConf success. topic=[%s], orderConf=[%s]", topic, order_conf))
    elif method == "delete":
        admin.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        if env.json:
            emit_json({"topic": topic, "deleted": True})
        else:
            out(printf("delete orderConf success. topic=[%s]", topic))
    else:
        raise CommandFailed(f"-m/--method must be put, get or delete, not {method!r}")
