"""Commands that send or read messages: sendMessage, consumeMessage (mqadmin's), and rmqadmin's
``tail`` (follow a topic live, like ``kcat -C``) and ``produce`` (stdin lines as messages, like
``kcat -P``).

Reading uses the Admin API's pulls (group TOOLS_CONSUMER, as mqadmin's pull consumer; nothing is
committed); sending uses ``rmqwire.Producer``.

JSON documents: ``sendMessage`` {brokerName, queueId, sendStatus, msgId, offsetMsgId};
``consumeMessage`` {"messages": [...]}; ``produce`` {topic, sent, failed, batches, queues:
{"broker:qid": n}}; ``tail --format json`` (or ``--json``) one JSON object per message and line:
{topic, brokerName, queueId, queueOffset, msgId, tags, keys, properties, storeTimestamp, body}.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from rmqwire.admin.javautil import hashmap_order
from rmqwire.admin.types import PullStatus
from rmqwire.cli.base import CommandFailed, Env, command, emit_json, opt, out, parse_int
from rmqwire.cli.javafmt import parse_timestamp, printf
from rmqwire.cli.message import _message_line, message_doc
from rmqwire.codec.message import MessageExt
from rmqwire.model import MessageQueue

#: mqadmin's consumeMessage default count.
DEFAULT_COUNT = 128
#: How long tail waits between rounds of pulls that found nothing (seconds).
TAIL_IDLE = 0.1


# ---- sendMessage -------------------------------------------------------------------------------


@command("sendMessage", "Send a message.")
@opt("-t", "--topic", "topic", "Topic name", required=True)
@opt("-p", "--body", "body", "UTF-8 string format of the message body", required=True)
@opt("-k", "--key", "keys", "Message keys")
@opt("-c", "--tags", "tags", "Message tags")
@opt("-b", "--broker", "broker", "Send message to target broker")
@opt("-i", "--qid", "qid", "Send message to target queue")
@opt("-m", "--msgTraceEnable", "trace", "Message Trace Enable, Default: false")
def send_message(env: Env, topic: str, body: str, keys: str | None, tags: str | None,
                 broker: str | None, qid: str | None, trace: str | None) -> None:
    from rmqwire import Message

    if qid is not None and broker is None:
        if env.json:
            raise CommandFailed("Broker name must be set if the queue is chosen!")
        out("Broker name must be set if the queue is chosen!")
        return
    queue_id = parse_int(qid, "-i/--qid") if qid is not None else -1
    msg = Message(topic, body.encode("utf-8"), tags=tags, keys=keys)
    producer = env.producer(str(time.time_ns() // 1_000_000))
    producer.start()
    try:
        queue = MessageQueue(topic, broker, queue_id) if broker and queue_id > -1 else None
        result = producer.send(msg, queue=queue)
    finally:
        producer.shutdown()
    if env.json:
        emit_json({"brokerName": result.message_queue.broker_name,
                   "queueId": result.message_queue.queue_id, "sendStatus": result.status.name,
                   "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id})
        return
    out(printf("%-32s  %-4s  %-20s    %s%n", "#Broker Name", "#QID", "#Send Result", "#MsgId"))
    out(printf("%-32s  %-4s  %-20s    %s%n", result.message_queue.broker_name,
               result.message_queue.queue_id, result.status.name, result.msg_id))


# ---- consumeMessage ----------------------------------------------------------------------------


@command("consumeMessage", "Consume message")
@opt("-t", "--topic", "topic", "Topic name", required=True)
@opt("-b", "--brokerName", "broker_name", "Broker name")
@opt("-i", "--queueId", "queue_id", "Queue Id")
@opt("-o", "--offset", "offset", "Queue offset")
@opt("-g", "--consumerGroup", "group", "Consumer group name")
@opt("-s", "--beginTimestamp", "begin", "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@opt("-e", "--endTimestamp", "end", "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@opt("-c", "--MessageNumber", "count", "Number of message to be consumed")
def consume_message(env: Env, topic: str, broker_name: str | None, queue_id: str | None,
                    offset: str | None, group: str | None, begin: str | None, end: str | None,
                    count: str | None) -> None:
    def stop(text: str) -> None:
        if env.json:
            raise CommandFailed(text)
        out(text)

    n = DEFAULT_COUNT
    if count is not None:
        n = parse_int(count, "-c/--MessageNumber")
        if n <= 0:
            return stop("Please input a positive messageNumber!")
    if queue_id is not None and broker_name is None:
        return stop("Please set the brokerName before queueId!")
    if offset is not None and queue_id is None:
        return stop("Please set queueId before offset!")
    now = time.time_ns() // 1_000_000
    t_begin = t_end = 0
    if begin is not None:
        t_begin = _ts(begin, "-s/--beginTimestamp")
        if t_begin > now:
            return stop("Please set the beginTimestamp before now!")
    if end is not None:
        t_end = _ts(end, "-e/--endTimestamp")
        if t_end > now:
            return stop("Please set the endTimestamp before now!")
        if t_begin > t_end:
            return stop("Please make sure that the beginTimestamp is less than or equal to the "
                        "endTimestamp")
    reader = _QueueReader(env, group or "TOOLS_CONSUMER")
    with env.progress_bar(f"consumeMessage {topic}", n) as advance:
        reader.advance = advance
        if queue_id is None:
            left = n
            for mq in hashmap_order(hashmap_order(env.admin.fetch_subscribe_message_queues(topic))):
                if left == 0:
                    break
                lo, hi = reader.bounds(mq, t_begin, t_end)
                if hi - lo > left:
                    if not env.json:
                        out(printf("The older %d message of the %d queue will be provided\n", left,
                                   mq.queue_id))
                    hi = lo + left - 1
                    left = 0
                else:
                    left = left - (hi - lo) - 1
                reader.read(mq, lo, hi)
        else:
            mq = MessageQueue(topic, broker_name, parse_int(queue_id, "-i/--queueId"))
            start = parse_int(offset, "-o/--offset") if offset is not None else 0
            lo, hi = reader.bounds(mq, t_begin, t_end)
            if start > hi:
                if not env.json:
                    out(printf("%s no matched msg, offset=%s\n", mq, start))
            else:
                lo = max(lo, start)
                if hi - lo > n:
                    if not env.json:
                        out(printf("The oldler %d message will be provided\n", n))
                    hi = lo + n - 1
                reader.read(mq, lo, hi)
    if env.json:
        emit_json({"topic": topic, "messages": reader.docs})


def _ts(value: str, what: str) -> int:
    try:
        return parse_timestamp(value)
    except ValueError as e:
        raise CommandFailed(f"{what}: {e}") from None


class _QueueReader:
    """``ConsumeMessageCommand.pullMessageByQueue``: pull [lo, hi] and print as mqadmin does."""

    def __init__(self, env: Env, group: str) -> None:
        self.env, self.group = env, group
        self.docs: list[dict[str, Any]] = []
        self.advance: Any = lambda n=1: None

    def bounds(self, mq: MessageQueue, t_begin: int, t_end: int) -> tuple[int, int]:
        admin = self.env.admin
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        if t_begin > 0:
            lo = admin.search_offset(mq, t_begin)
        if t_end > 0:
            hi = admin.search_offset(mq, t_end)
        return lo, hi

    def read(self, mq: MessageQueue, lo: int, hi: int) -> None:
        env, offset = self.env, lo
        while offset <= hi:
            try:
                result = env.admin.pull(mq, "*", offset, hi - offset + 1, self.group)
            except Exception as e:  # mqadmin prints the trace and leaves the queue
                sys.stderr.write(f"rmqadmin consumeMessage: {mq}: {e}\n")
                return
            offset = result.next_begin_offset
            if result.status is PullStatus.FOUND:
                self.advance(len(result.messages))
                if env.json:
                    self.docs.extend(message_doc(m, None, "utf-8") for m in result.messages)
                    continue
                out("Consume ok\n")
                for m in result.messages:
                    out(_message_line(m, mq.broker_name, "utf-8", True))
            elif result.status is PullStatus.NO_MATCHED_MSG:
                if not env.json:
                    out(printf("%s no matched msg. status=%s, offset=%s\n", mq, result.status.name,
                               offset))
            else:
                if not env.json:
                    out(printf("%s print msg finished. status=%s, offset=%s\n", mq,
                               result.status.name, offset))
                return


# ---- tail --------------------------------------------------------------------------------------


def tail_line(msg: MessageExt, broker_name: str, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({
            "topic": msg.topic, "brokerName": broker_name, "queueId": msg.queue_id,
            "queueOffset": msg.queue_offset, "msgId": msg.msg_id, "tags": msg.tags,
            "keys": msg.keys, "properties": dict(msg.properties),
            "storeTimestamp": msg.store_timestamp,
            "body": (msg.body or b"").decode("utf-8", "replace"),
        }, ensure_ascii=False) + "\n"
    return (msg.body or b"").decode("utf-8", "replace") + "\n"


@command("tail", "Follow a topic live across all its queues (Ctrl-C stops).")
@opt("-t", "--topic", "topic", "Topic name", required=True)
@opt("", "--from", "start", "earliest | latest (default) | a timestamp (millis or "
     "yyyy-MM-dd#HH:mm:ss:SSS)", metavar="WHERE")
@opt("", "--count", "count", "Stop after this many messages", metavar="N")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              help="text: the body of each message; json: one JSON object per message")
@opt("-s", "--subExpression", "sub", "Subscribe Expression(eg: TagA || TagB)")
def tail(env: Env, topic: str, start: str | None, count: str | None, fmt: str,
         sub: str | None) -> None:
    admin = env.admin
    if env.json:
        fmt = "json"
    limit = parse_int(count, "--count") if count is not None else None
    if limit is not None and limit <= 0:
        raise CommandFailed("--count must be positive")
    queues = admin.fetch_subscribe_message_queues(topic)
    if not queues:
        raise CommandFailed(f"topic {topic} has no readable queue")
    where = (start or "latest").strip()
    offsets: dict[MessageQueue, int] = {}
    for mq in queues:
        if where == "earliest":
            offsets[mq] = admin.min_offset(mq)
        elif where == "latest":
            offsets[mq] = admin.max_offset(mq)
        else:
            offsets[mq] = admin.search_offset(mq, _ts(where, "--from"))
    seen = 0
    try:
        with env.progress_bar(f"tail {topic}", limit) if limit else _no_bar() as advance:
            while limit is None or seen < limit:
                results = admin.pull_queues(list(offsets.items()), sub or "*", 32)
                found = False
                for (mq, _), result in zip(list(offsets.items()), results, strict=True):
                    if result.status is PullStatus.OFFSET_ILLEGAL:
                        offsets[mq] = result.next_begin_offset  # moved: go on from there
                        continue
                    offsets[mq] = result.next_begin_offset
                    for msg in result.messages:
                        if limit is not None and seen >= limit:
                            break
                        out(tail_line(msg, mq.broker_name, fmt))
                        seen += 1
                        advance(1)
                        found = True
                sys.stdout.flush()
                if not found:
                    time.sleep(TAIL_IDLE)
    except KeyboardInterrupt:  # Ctrl-C ends a tail: a clean exit
        sys.stdout.flush()


class _no_bar:
    def __enter__(self) -> Any:
        return lambda n=1: None

    def __exit__(self, *exc: object) -> None:
        return None


# ---- produce -----------------------------------------------------------------------------------


@command("produce", "Send each line of stdin as a message (Ctrl-D ends).")
@opt("-t", "--topic", "topic", "Topic name", required=True)
@opt("", "--tags", "tags", "Message tags")
@opt("", "--keys", "keys", "Message keys (space-separated)")
@click.option("--property", "properties", multiple=True, metavar="K=V",
              help="A user property (repeatable)")
@opt("", "--batch", "batch", "Send N lines per batch request (default 1)", metavar="N")
@opt("-g", "--producerGroup", "group", "Producer group (default: a new one per run)")
@click.option("-f", "--file", "path", type=click.Path(dir_okay=False, allow_dash=True),
              default="-", help="Read lines from this file instead of stdin")
def produce(env: Env, topic: str, tags: str | None, keys: str | None,
            properties: tuple[str, ...], batch: str | None, group: str | None, path: str) -> None:
    from rmqwire import Message

    props: dict[str, str] = {}
    for item in properties:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise CommandFailed(f"--property takes KEY=VALUE, not {item!r}")
        props[k] = v
    size = parse_int(batch, "--batch") if batch is not None else 1
    if size <= 0:
        raise CommandFailed("--batch must be positive")
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    total_bytes = None
    if path != "-":
        import os

        total_bytes = os.path.getsize(path)
    producer = env.producer(group or f"rmqadmin_produce_{time.time_ns() // 1_000_000}")
    sent = failed = batches = 0
    per_queue: dict[str, int] = {}
    producer.start()
    try:
        with env.progress_bar(f"produce {topic}", total_bytes) as advance:
            pending: list[Any] = []

            def flush() -> None:
                nonlocal sent, failed, batches
                if not pending:
                    return
                try:
                    result = producer.send(pending if len(pending) > 1 else pending[0])
                except Exception as e:
                    failed += len(pending)
                    sys.stderr.write(f"rmqadmin produce: {e}\n")
                else:
                    sent += len(pending)
                    key = f"{result.message_queue.broker_name}:{result.message_queue.queue_id}"
                    per_queue[key] = per_queue.get(key, 0) + len(pending)
                batches += 1
                pending.clear()

            for raw in stream:
                advance(len(raw))
                line = raw.rstrip(b"\r\n")
                pending.append(Message(topic, line, tags=tags, keys=keys, properties=props))
                if len(pending) >= size:
                    flush()
            flush()
    except KeyboardInterrupt:
        pass
    finally:
        producer.shutdown()
        if stream is not sys.stdin.buffer:
            stream.close()
    if env.json:
        emit_json({"topic": topic, "sent": sent, "failed": failed, "batches": batches,
                   "queues": per_queue})
    else:
        queues = ", ".join(f"{k}={v}" for k, v in sorted(per_queue.items()))
        out(f"sent {sent} message(s) to {topic} in {batches} request(s), {failed} failed"
            + (f"; per queue: {queues}" if queues else "") + "\n")
    if failed:
        raise CommandFailed(f"{failed} of {sent + failed} message(s) were not sent")
