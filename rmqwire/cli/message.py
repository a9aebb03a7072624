"""Message commands: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, printMsg,
printMsgByQueue, queryCq.

Like mqadmin, the commands that show one message write its body to
``/tmp/rocketmq/msgbodys/<msgId>`` and print that path.

JSON documents: one message is {msgId, offsetMsgId, topic, tags, keys, queueId, queueOffset,
commitLogOffset, reconsumeTimes, bornTimestamp, storeTimestamp, bornHost, storeHost, sysFlag,
properties, bodyPath, body (with ``-f``), tracks: [{consumerGroup, trackType, exceptionDesc}]};
``queryMsgById`` {"messages": [...]}, with ``-s true`` {"resent": [{originalMsgId, sendResult:
{sendStatus, msgId, offsetMsgId, brokerName, queueId, queueOffset}}]}; ``queryMsgByKey``
{"messages": [{msgId, queueId, queueOffset}]}; ``printMsg`` {"queues": [{queue, minOffset,
maxOffset, messages: [...]}]}; ``printMsgByQueue`` {"messages": [...], "tags": {tag: count}};
``queryCq`` the QueryConsumeQueueResponseBody tree.
"""

from __future__ import annotations

import codecs
import sys
import time
from pathlib import Path
from typing import Any

from rmqwire.admin.javautil import hashmap_order
from rmqwire.admin.types import MessageTrack, PullStatus
from rmqwire.cli.base import CommandFailed, Env, command, emit_json, opt, out, parse_bool, parse_int
from rmqwire.cli.javafmt import human_time2, jstr, map_str, parse_timestamp, pretty_json, printf
from rmqwire.codec.message import MessageExt, java_hashmap_order
from rmqwire.model import MessageQueue

#: Where mqadmin writes message bodies.
BODY_DIR = Path("/tmp/rocketmq/msgbodys")


def host_str(host: tuple[str, int]) -> str:
    """``RemotingHelper.parseSocketAddressAddr``: ``ip:port``."""
    return f"{host[0]}:{host[1]}"


def properties_str(msg: MessageExt) -> str:
    """The properties as Java's ``HashMap(128)`` built by the decoder prints them."""
    return map_str(java_hashmap_order(msg.properties, 128))


def charset(name: str) -> str:
    try:
        return codecs.lookup(name.strip()).name
    except LookupError:
        raise CommandFailed(f"unsupported charset {name!r}") from None


def write_body(msg: MessageExt, index: int = 0) -> str:
    BODY_DIR.mkdir(parents=True, exist_ok=True)
    path = f"{BODY_DIR}/{msg.msg_id}" + (f"_{index}" if index > 0 else "")
    Path(path).write_bytes(msg.body or b"")
    return path


def message_doc(msg: MessageExt, body_path: str | None = None, body_charset: str | None = None,
                tracks: list[MessageTrack] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "msgId": msg.msg_id, "offsetMsgId": msg.offset_msg_id, "topic": msg.topic,
        "tags": msg.tags, "keys": msg.keys, "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset, "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times, "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp, "bornHost": host_str(msg.born_host),
        "storeHost": host_str(msg.store_host), "sysFlag": msg.sys_flag,
        "properties": dict(msg.properties),
    }
    if body_path is not None:
        doc["bodyPath"] = body_path
    if body_charset is not None:
        doc["body"] = (msg.body or b"").decode(body_charset, "replace")
    if tracks is not None:
        doc["tracks"] = [{"consumerGroup": t.consumer_group, "trackType": t.track_type.name,
                          "exceptionDesc": t.exception_desc} for t in tracks]
    return doc


def _tracks(env: Env, msg: MessageExt) -> list[MessageTrack] | Exception:
    try:
        tracks = env.admin.message_track_detail(msg)
    except Exception as e:  # mqadmin prints the trace after the message
        return e
    # GroupList.groupList is a HashSet: mqadmin walks the groups in its order
    order = {g: i for i, g in enumerate(hashmap_order(t.consumer_group for t in tracks))}
    return sorted(tracks, key=lambda t: order[t.consumer_group])


def print_message(env: Env, msg: MessageExt | None, body_charset: str | None,
                  docs: list[dict[str, Any]]) -> None:
    """``QueryMsgByIdSubCommand.printMsg``."""
    if msg is None:
        if not env.json:
            out(printf("%nMessage not found!"))
        return
    path = write_body(msg)
    tracks = _tracks(env, msg)
    if env.json:
        docs.append(message_doc(msg, path, body_charset,
                                tracks if isinstance(tracks, list) else []))
        return
    s, d = "%-20s %s%n", "%-20s %d%n"
    out(printf(s, "OffsetID:", msg.offset_msg_id))
    out(printf(s, "Topic:", msg.topic))
    out(printf(s, "Tags:", f"[{jstr(msg.tags)}]"))
    out(printf(s, "Keys:", f"[{jstr(msg.keys)}]"))
    out(printf(d, "Queue ID:", msg.queue_id))
    out(printf(d, "Queue Offset:", msg.queue_offset))
    out(printf(d, "CommitLog Offset:", msg.commit_log_offset))
    out(printf(d, "Reconsume Times:", msg.reconsume_times))
    out(printf(s, "Born Timestamp:", human_time2(msg.born_timestamp)))
    out(printf(s, "Store Timestamp:", human_time2(msg.store_timestamp)))
    out(printf(s, "Born Host:", host_str(msg.born_host)))
    out(printf(s, "Store Host:", host_str(msg.store_host)))
    out(printf(d, "System Flag:", msg.sys_flag))
    out(printf(s, "Properties:", properties_str(msg)))
    out(printf(s, "Message Body Path:", path))
    if body_charset is not None:
        out(printf(s, "Message Body:", (msg.body or b"").decode(body_charset, "replace")))
    if isinstance(tracks, Exception):
        sys.stderr.write(f"rmqadmin: message tracks: {tracks}\n")
    elif not tracks:
        out(printf("%n%nWARN: No Consumer"))
    else:
        out(printf("%n%n"))
        for t in tracks:
            out(printf("%s%n", str(t)))


# ---- queryMsgById / queryMsgByKey / queryMsgByUniqueKey / queryMsgByOffset ---------------------


@command("queryMsgById", "Query Message by Id.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-i", "--msgId", "msg_id", "Message Id", required=True)
@opt("-g", "--consumerGroup", "group", "consumer group name")
@opt("-d", "--clientId", "client_id", "The consumer's client id")
@opt("-s", "--sendMessage", "send", "resend message")
@opt("-u", "--unitName", "unit", "unit name")
@opt("-f", "--bodyFormat", "body_format", "print message body by the specified format")
@opt("-c", "--cluster", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route.")
def query_msg_by_id(env: Env, topic: str, msg_id: str, group: str | None, client_id: str | None,
                    send: str | None, unit: str | None, body_format: str | None,
                    cluster: str | None) -> None:
    if group and client_id:
        for one in msg_id.split(","):
            if one.strip():
                push_msg(env, cluster or None, group.strip(), client_id.strip(), topic, one.strip())
        return
    if send is not None:
        if parse_bool(send):
            resend(env, cluster or None, topic, [m.strip() for m in msg_id.split(",") if m.strip()],
                   unit)
        elif env.json:
            emit_json({"resent": []})
        return
    body_charset = charset(body_format) if body_format is not None else None
    docs: list[dict[str, Any]] = []
    for one in msg_id.split(","):
        if one.strip():
            msg = env.admin.view_message(topic, one.strip(), cluster or None)
            print_message(env, msg, body_charset, docs)
    if env.json:
        emit_json({"messages": docs})


#: The producer group mqadmin resends with.
RESEND_GROUP = "ReSendMsgById"


def resend(env: Env, cluster: str | None, topic: str, msg_ids: list[str], unit: str | None) -> None:
    """Java ``sendMsg``: each message, looked up as ``-i`` finds it, is sent again as it is
    stored (properties and UNIQ_KEY included: the new message keeps the original's msgId) by a
    producer of group ReSendMsgById. An id that fails is reported on one line and the others
    go on, as mqadmin goes on after printing the trace; the exit is then non-zero."""
    from rmqwire.client.message import Message

    producer = env.producer(RESEND_GROUP, instance_name=str(time.time_ns() // 1_000_000),
                            unit_name=unit)
    producer.start()
    docs: list[dict[str, Any]] = []
    failed: list[str] = []
    try:
        for one in msg_ids:
            try:
                msg = env.admin.view_message(topic, one, cluster)
            except Exception as e:
                failed.append(f"{one}: {e}")
                continue
            if msg is None:
                if not env.json:
                    out(printf("no message. msgId=%s", one))
                docs.append({"originalMsgId": one, "sendResult": None})
                continue
            if not env.json:
                out(printf("prepare resend msg. originalMsgId=%s", one))
            try:
                result = producer.send(Message.of(msg))
            except Exception as e:
                failed.append(f"{one}: {e}")
                continue
            if env.json:
                docs.append({"originalMsgId": one, "sendResult": send_result_doc(result)})
            else:
                out(send_result_str(result))
    finally:
        producer.shutdown()
    if env.json:
        emit_json({"resent": docs})
    if failed:
        raise CommandFailed("resend failed: " + "; ".join(failed))


def send_result_str(r: Any) -> str:
    """Java 5.3.3 ``SendResult.toString``."""
    return (f"SendResult [sendStatus={r.status.name}, msgId={jstr(r.msg_id)}, "
            f"offsetMsgId={jstr(r.offset_msg_id)}, messageQueue={r.message_queue}, "
            f"queueOffset={r.queue_offset}, recallHandle={jstr(r.recall_handle)}]")


def send_result_doc(r: Any) -> dict[str, Any]:
    return {"sendStatus": r.status.name, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
            "brokerName": r.message_queue.broker_name, "queueId": r.message_queue.queue_id,
            "queueOffset": r.queue_offset}


def push_msg(env: Env, cluster: str | None, group: str, client_id: str, topic: str, msg_id: str) -> None:
    """Java ``pushMsg``: only a push consumer is asked to consume the message."""
    info = env.admin.get_consumer_running_info(group, client_id)
    if info is not None and (info.properties or {}).get("PROP_CONSUME_TYPE") == "CONSUME_PASSIVELY":
        print_consume_directly(env, env.admin.consume_message_directly(group, client_id, topic, msg_id, cluster))
    else:
        out(printf("this %s client is not push consumer ,not support direct push %n", client_id))


def print_consume_directly(env: Env, r: Any) -> None:
    """A ConsumeMessageDirectlyResult as Java's toString (no newline), or as JSON."""
    if env.json:
        emit_json({"order": r.order, "autoCommit": r.auto_commit, "consumeResult": r.consume_result,
                   "remark": r.remark, "spentTimeMills": r.spent_time_mills})
        return
    out(printf("ConsumeMessageDirectlyResult [order=%s, autoCommit=%s, consumeResult=%s, remark=%s, "
               "spentTimeMills=%s]", jstr(r.order), jstr(r.auto_commit), jstr(r.consume_result),
               jstr(r.remark), jstr(r.spent_time_mills)))


def push_unique_msg(env: Env, cluster: str | None, group: str, client_id: str, topic: str, msg_id: str) -> None:
    """queryMsgByUniqueKey -g/-d: as ``push_msg``, but a failed running-info query is reported
    and the command goes on (Java's own wording for each case)."""
    try:
        info = env.admin.get_consumer_running_info(group, client_id)
    except Exception:
        out(printf("get consumer runtime info for %s client failed %n", client_id))
        info = None
    if info is not None and (info.properties or {}).get("PROP_CONSUME_TYPE") == "CONSUME_PASSIVELY":
        print_consume_directly(env, env.admin.consume_message_directly(group, client_id, topic, msg_id, cluster))
    else:
        out(printf("get consumer info failed or this %s client is not push consumer, not support direct push %n",
                   client_id))


@command("queryMsgByKey", "Query Message by Key.")
@opt("-t", "--topic", "topic", "Topic name", required=True)
@opt("-k", "--msgKey", "key", "Message Key", required=True)
@opt("-b", "--beginTimestamp", "begin", "Begin timestamp(ms). default:0, eg:1676730526212")
@opt("-e", "--endTimestamp", "end", "End timestamp(ms). default:Long.MAX_VALUE, eg:1676730526212")
@opt("-m", "--maxNum", "max_num", "The maximum number of messages returned by the query, default:64")
@opt("-c", "--cluster", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route.")
def query_msg_by_key(env: Env, topic: str, key: str, begin: str | None, end: str | None,
                     max_num: str | None, cluster: str | None) -> None:
    result = env.admin.query_message(
        topic, key, parse_int(max_num, "-m/--maxNum") if max_num else 64,
        parse_int(begin, "-b/--beginTimestamp") if begin else 0,
        parse_int(end, "-e/--endTimestamp") if end else 2**63 - 1, cluster or None)
    if env.json:
        emit_json({"topic": topic, "key": key,
                   "messages": [{"msgId": m.msg_id, "queueId": m.queue_id,
                                 "queueOffset": m.queue_offset} for m in result.messages]})
        return
    out(printf("%-50s %4s %40s%n", "#Message ID", "#QID", "#Offset"))
    for m in result.messages:
        out(printf("%-50s %4d %40d%n", m.msg_id, m.queue_id, m.queue_offset))


@command("queryMsgByUniqueKey", "Query Message by Unique key.")
@opt("-i", "--msgId", "msg_id", "Message Id", required=True)
@opt("-g", "--consumerGroup", "group", "consumer group name")
@opt("-d", "--clientId", "client_id", "The consumer's client id")
@opt("-t", "--topic", "topic", "The topic of msg", required=True)
@opt("-a", "--showAll", "show_all", "Print all message, the limit is 32", flag=True)
@opt("-c", "--cluster", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route.")
def query_msg_by_unique_key(env: Env, msg_id: str, group: str | None, client_id: str | None,
                            topic: str, show_all: bool, cluster: str | None) -> None:
    if group and client_id:
        push_unique_msg(env, cluster or None, group.strip(), client_id.strip(), topic, msg_id.strip())
        return
    result = env.admin.query_message_by_uniq_key(topic, msg_id, 32, 0, 2**63 - 1, cluster or None)
    msgs = result.messages
    # Java sorts by (int) difference of store times: a stable sort on the store time
    msgs = sorted(msgs, key=lambda m: m.store_timestamp)
    docs = []
    for i, msg in enumerate(msgs if show_all else msgs[:1]):
        path = write_body(msg, i)
        tracks = _tracks(env, msg)
        if env.json:
            docs.append(message_doc(msg, path, None, tracks if isinstance(tracks, list) else []))
            continue
        s, d = "%-20s %s%n", "%-20s %d%n"
        out(printf(s, "Topic:", msg.topic))
        out(printf(s, "Tags:", f"[{jstr(msg.tags)}]"))
        out(printf(s, "Keys:", f"[{jstr(msg.keys)}]"))
        out(printf(d, "Queue ID:", msg.queue_id))
        out(printf(d, "Queue Offset:", msg.queue_offset))
        out(printf(d, "CommitLog Offset:", msg.commit_log_offset))
        out(printf(d, "Reconsume Times:", msg.reconsume_times))
        out(printf(s, "Born Timestamp:", human_time2(msg.born_timestamp)))
        out(printf(s, "Store Timestamp:", human_time2(msg.store_timestamp)))
        out(printf(s, "Born Host:", host_str(msg.born_host)))
        out(printf(s, "Store Host:", host_str(msg.store_host)))
        out(printf(d, "System Flag:", msg.sys_flag))
        out(printf(s, "Properties:", properties_str(msg)))
        out(printf(s, "Message Body Path:", path))
        if isinstance(tracks, Exception):
            sys.stderr.write(f"rmqadmin: message tracks: {tracks}\n")
        elif not tracks:
            out(printf("%n%nWARN: No Consumer"))
        else:
            out(printf("%n%n"))
            for t in tracks:
                out(printf("%s", str(t)))  # sic: mqadmin prints these without line breaks
    if env.json:
        emit_json({"messages": docs})


@command("queryMsgByOffset", "Query Message by offset.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-b", "--brokerName", "broker_name", "Broker Name", required=True)
@opt("-i", "--queueId", "queue_id", "Queue Id", required=True)
@opt("-o", "--offset", "offset", "Queue Offset", required=True)
@opt("-f", "--bodyFormat", "body_format", "print message body by the specified format")
def query_msg_by_offset(env: Env, topic: str, broker_name: str, queue_id: str, offset: str,
                        body_format: str | None) -> None:
    body_charset = charset(body_format) if body_format is not None else None
    mq = MessageQueue(topic, broker_name, parse_int(queue_id, "-i/--queueId"))
    result = env.admin.pull(mq, "*", parse_int(offset, "-o/--offset"), 1)
    docs: list[dict[str, Any]] = []
    if result.status is PullStatus.FOUND and result.messages:
        print_message(env, result.messages[0], body_charset, docs)
    if env.json:
        emit_json({"status": result.status.name, "messages": docs})


# ---- printMsg / printMsgByQueue ----------------------------------------------------------------


def message_ext_str(msg: MessageExt, broker_name: str | None) -> str:
    """``MessageExt.toString`` (with ``Message.toString`` inside)."""
    body = "[" + ", ".join(str(b - 256 if b > 127 else b) for b in (msg.body or b"")) + "]"
    props = properties_str(msg)
    prepared = str(msg.properties.get("TRAN_MSG")).lower() == "true"
    txid = msg.properties.get("UNIQ_KEY") if prepared else None  # set by the pull, as in Java
    return (f"MessageExt [brokerName={jstr(broker_name)}, queueId={msg.queue_id}, "
            f"storeSize={msg.store_size}, queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, "
            f"bornTimestamp={msg.born_timestamp}, "
            f"bornHost=/{host_str(msg.born_host)}, storeTimestamp={msg.store_timestamp}, "
            f"storeHost=/{host_str(msg.store_host)}, msgId={msg.offset_msg_id}, commitLogOffset="
            f"{msg.commit_log_offset}, bodyCRC={msg.body_crc}, reconsumeTimes={msg.reconsume_times}, "
            f"preparedTransactionOffset={msg.prepared_transaction_offset}, toString()=Message{{topic='"
            f"{msg.topic}', flag={msg.flag}, properties={props}, body={body}, transactionId='"
            f"{jstr(txid)}'}}]")


def _message_line(msg: MessageExt, broker_name: str, body_charset: str, print_body: bool) -> str:
    body = (msg.body or b"").decode(body_charset, "replace") if print_body else "NOT PRINT BODY"
    return printf("MSGID: %s %s BODY: %s%n", msg.msg_id, message_ext_str(msg, broker_name), body)


def _timestamp(value: str, what: str) -> int:
    try:
        return parse_timestamp(value)
    except ValueError as e:
        raise CommandFailed(f"{what}: {e}") from None


@command("printMsg", "Print Message Detail.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-c", "--charsetName", "charset_name", "CharsetName(eg: UTF-8,GBK)")
@opt("-s", "--subExpression", "sub", "Subscribe Expression(eg: TagA || TagB)")
@opt("-b", "--beginTimestamp", "begin", "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@opt("-e", "--endTimestamp", "end", "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@opt("-d", "--printBody", "print_body", "print body")
@opt("-l", "--lmqParentTopic", "lmq_parent", "Lmq parent topic, lmq is used to find the route.")
def print_msg(env: Env, topic: str, charset_name: str | None, sub: str | None, begin: str | None,
              end: str | None, print_body: str | None, lmq_parent: str | None) -> None:
    admin = env.admin
    body_charset = charset(charset_name or "UTF-8")
    sub = sub or "*"
    show_body = print_body is None or parse_bool(print_body)
    route_topic = lmq_parent or topic
    # fetchSubscribeMessageQueues builds a HashSet twice (client, then pull consumer)
    mqs = [MessageQueue(topic, mq.broker_name, mq.queue_id)
           for mq in hashmap_order(hashmap_order(admin.fetch_subscribe_message_queues(route_topic)))]
    docs = []
    with env.progress_bar(f"printMsg {topic}", len(mqs)) as advance:
        for mq in mqs:
            lookup = MessageQueue(route_topic, mq.broker_name, mq.queue_id)
            min_offset = admin.min_offset(lookup if lmq_parent else mq)
            max_offset = admin.max_offset(lookup if lmq_parent else mq)
            if begin is not None:
                min_offset = admin.search_offset(mq, _timestamp(begin, "-b/--beginTimestamp"))
            if end is not None:
                max_offset = admin.search_offset(mq, _timestamp(end, "-e/--endTimestamp"))
            doc: dict[str, Any] = {"queue": {"topic": mq.topic, "brokerName": mq.broker_name,
                                             "queueId": mq.queue_id},
                                   "minOffset": min_offset, "maxOffset": max_offset,
                                   "messages": []}
            docs.append(doc)
            if not env.json:
                out(printf("minOffset=%s, maxOffset=%s, %s%n", min_offset, max_offset, mq))
            offset = min_offset
            while offset < max_offset:
                try:
                    result = admin.pull(mq, sub, offset, 32)
                except Exception as e:  # mqadmin prints the trace and leaves the queue
                    sys.stderr.write(f"rmqadmin printMsg: {mq}: {e}\n")
                    break
                offset = result.next_begin_offset
                if result.status is PullStatus.FOUND:
                    for msg in result.messages:
                        if env.json:
                            doc["messages"].append(message_doc(
                                msg, None, body_charset if show_body else None))
                        else:
                            out(_message_line(msg, mq.broker_name, body_charset, show_body))
                elif result.status is PullStatus.NO_MATCHED_MSG:
                    if not env.json:
                        out(printf("%s no matched msg. status=%s, offset=%s%n", mq,
                                   result.status.name, offset))
                else:
                    if not env.json:
                        out(printf("%s print msg finished. status=%s, offset=%s%n", mq,
                                   result.status.name, offset))
                    break
            if not env.json:
                out("--------------------------------------------------------\n")
            advance(1)
    if env.json:
        emit_json({"topic": topic, "queues": docs})


@command("printMsgByQueue", "Print Message Detail by queueId.")
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-a", "--brokerName", "broker_name", "broker name", required=True)
@opt("-i", "--queueId", "queue_id", "queue id", required=True)
@opt("-c", "--charsetName", "charset_name", "CharsetName(eg: UTF-8,GBK)")
@opt("-s", "--subExpression", "sub", "Subscribe Expression(eg: TagA || TagB)")
@opt("-b", "--beginTimestamp", "begin", "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@opt("-e", "--endTimestamp", "end", "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@opt("-p", "--printMsg", "print_msg_opt", "print msg. eg: true | false(default)")
@opt("-d", "--printBody", "print_body", "print body. eg: true | false(default)")
@opt("-f", "--calculate", "calculate", "calculate by tag. eg: true | false(default)")
def print_msg_by_queue(env: Env, topic: str, broker_name: str, queue_id: str,
                       charset_name: str | None, sub: str | None, begin: str | None,
                       end: str | None, print_msg_opt: str | None, print_body: str | None,
                       calculate: str | None) -> None:
    admin = env.admin
    body_charset = charset(charset_name or "UTF-8")
    show_msg, show_body, by_tag = parse_bool(print_msg_opt), parse_bool(print_body), parse_bool(calculate)
    mq = MessageQueue(topic, broker_name, parse_int(queue_id, "-i/--queueId"))
    min_offset, max_offset = admin.min_offset(mq), admin.max_offset(mq)
    if begin is not None:
        min_offset = admin.search_offset(mq, _timestamp(begin, "-b/--beginTimestamp"))
    if end is not None:
        max_offset = admin.search_offset(mq, _timestamp(end, "-e/--endTimestamp"))
    tags: dict[str, int] = {}
    docs = []
    offset = min_offset
    with env.progress_bar(f"printMsgByQueue {mq.topic}:{mq.queue_id}",
                          max(max_offset - min_offset, 0)) as advance:
        while offset < max_offset:
            try:
                result = admin.pull(mq, sub or "*", offset, 32)
            except Exception as e:  # mqadmin prints the trace and stops
                sys.stderr.write(f"rmqadmin printMsgByQueue: {mq}: {e}\n")
                break
            advance(result.next_begin_offset - offset)
            offset = result.next_begin_offset
            if result.status is not PullStatus.FOUND:
                break
            for msg in result.messages:
                if by_tag and msg.tags and msg.tags.strip():
                    tags[msg.tags] = tags.get(msg.tags, 0) + 1
                if show_msg:
                    if env.json:
                        docs.append(message_doc(msg, None, body_charset if show_body else None))
                    else:
                        out(_message_line(msg, broker_name, body_charset, show_body))
    # TagCountBean order: count descending (a stable sort of Java's HashMap order)
    ranked = sorted(hashmap_order(tags), key=lambda t: -tags[t]) if by_tag else []
    if env.json:
        emit_json({"queue": {"topic": mq.topic, "brokerName": mq.broker_name,
                             "queueId": mq.queue_id},
                   "messages": docs, "tags": {t: tags[t] for t in ranked}})
        return
    for t in ranked:
        out(printf("Tag: %-30s Count: %s%n", t, tags[t]))


# ---- queryCq -----------------------------------------------------------------------------------


@command("queryCq", "Query cq command.", aliases=("queryConsumeQueue",))
@opt("-t", "--topic", "topic", "topic name", required=True)
@opt("-q", "--queue", "queue", "queue num, ie. 1", required=True)
@opt("-i", "--index", "index", "start queue index.", required=True)
@opt("-c", "--count", "count", "how many.")
@opt("-b", "--broker", "broker", "broker addr.")
@opt("-g", "--consumer", "group", "consumer group.")
def query_cq(env: Env, topic: str, queue: str, index: str, count: str | None,
             broker: str | None, group: str | None) -> None:
    admin = env.admin
    queue_id = parse_int(queue, "-q/--queue")
    start = parse_int(index, "-i/--index")
    n = parse_int(count, "-c/--count") if count is not None else 10
    if not broker:
        route = admin.examine_topic_route_info(topic)
        if not route.broker_datas:
            raise CommandFailed("No topic route data!")
        broker = (route.broker_datas[0].broker_addrs or {}).get(0)
        if broker is None:
            raise CommandFailed(f"topic {topic} has no master broker in its route")
    body = admin.query_consume_queue(broker, topic, queue_id, start, n, group or None)
    if env.json:
        emit_json(body.to_fastjson())
        return
    if body.subscription_data is not None:
        out(printf("Subscription data: \n%s\n", pretty_json(body.subscription_data.to_fastjson())))
        out("======================================\n")
    if body.filter_data is not None:
        out(printf("Filter data: \n%s\n", body.filter_data))
        out("======================================\n")
    out(printf("Queue data: \nmax: %d, min: %d\n", body.max_queue_index, body.min_queue_index))
    out("======================================\n")
    for i, qd in enumerate(body.queue_data or [], start):
        out(f"idx: {i}\n")
        out(f"ConsumeQueueData{{physicOffset={qd.physic_offset}, physicSize={qd.physic_size}, "
            f"tagsCode={qd.tags_code}, extendDataJson='{jstr(qd.extend_data_json)}', bitMap='"
            f"{jstr(qd.bit_map)}', eval={jstr(qd.eval)}, msg='{jstr(qd.msg)}'}}\n")
        out("======================================\n")
