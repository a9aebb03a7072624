"""rmqwire interop peer: rocketmq-client-cpp (PyPI ``rocketmq`` 0.4.4, ctypes) behind the shared CLI.

Runs only inside the dedicated venv made by ``tools.peers.cpp_peer.ensure_cpp_venv()``: the wheel
bundles ``librocketmq.so`` and its top-level package name clashes with other RocketMQ packages.

    python peer.py produce --namesrv A --topic T --count N [--mode sync|async|oneway|ordered|delay]
                   [--tag X] [--keys K] [--prop k=v ...] [--body TEXT | --body-size B] [--group G]
                   [--queue Q] [--delay-level L]
    python peer.py consume --namesrv A --topic T --count N [--mode push] [--model cluster|broadcast]
                   [--orderly] [--group G] [--timeout-ms M] [--sub EXPR] [--prop-names a,b]

What the C API cannot report comes out as null: the send result has no queue or offset message id,
a received message has no broker name, hosts or property list (``--prop-names`` names the
properties to read back). Received bodies come through a C string, so they stop at the first NUL.
``--from`` is accepted but the C API has no setting for it (the client consumes from the last
offset, which the broker turns into 0 for a new group while the queue start is still in memory).
Exit codes: 0 ok, 2 error, 3 consume timeout.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import hashlib
import json
import os
import sys
import threading
import time
from typing import Any

# stdout is reserved for JSON lines; keep a private handle, send stray prints to stderr.
_OUT = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
sys.stdout = sys.stderr
_LOCK = threading.Lock()

from rocketmq.client import Message, Producer, PushConsumer, SendStatus  # noqa: E402
from rocketmq.exceptions import ProducerSendSyncFailed  # noqa: E402
from rocketmq.ffi import MessageModel, dll  # noqa: E402


class UsageError(Exception):
    pass


def emit(obj: dict) -> None:
    line = json.dumps(obj, ensure_ascii=False)
    with _LOCK:
        _OUT.write(line + "\n")
        _OUT.flush()


def subst(s: str, i: int) -> str:
    return s.replace("{i}", str(i))


def pattern_body(size: int, index: int) -> bytes:
    """Same filler as the Java and Node peers: equal (size, index) gives identical bytes."""
    prefix = f"body-{index}-".encode("ascii")
    return bytes(prefix[j] if j < len(prefix) else 97 + (j * 7 + index) % 26 for j in range(size))


def build(args: argparse.Namespace, i: int) -> tuple[Message, bytes, dict[str, str]]:
    if args.body is not None:
        body = subst(args.body, i).encode("utf-8")
    elif args.body_size is not None:
        body = pattern_body(args.body_size, i)
    else:
        body = f"hello-{i}".encode()
    msg = Message(args.topic)
    # SetByteMessageBody takes an explicit length, so bodies may contain NUL bytes.
    dll.SetByteMessageBody(msg._handle, body, len(body))
    props: dict[str, str] = {}
    if args.tag is not None:
        props["TAGS"] = subst(args.tag, i)
        msg.set_tags(props["TAGS"])
    if args.keys is not None:
        props["KEYS"] = subst(args.keys, i)
        msg.set_keys(props["KEYS"])
    for kv in args.prop:
        k, _, v = kv.partition("=")
        props[k] = subst(v, i)
        msg.set_property(k, props[k])
    if args.mode == "delay":
        msg.set_delay_time_level(args.delay_level)
        props["DELAY"] = str(args.delay_level)
    return msg, body, props


def sent_record(i: int, args: argparse.Namespace, body: bytes, props: dict[str, str],
                msg_id: str | None, offset: int | None, status: str) -> dict:
    return {
        "index": i, "msgId": msg_id, "offsetMsgId": None, "queue": None, "queueOffset": offset,
        "status": status, "topic": args.topic, "bodySha256": hashlib.sha256(body).hexdigest(),
        "bodySize": len(body), "tags": props.get("TAGS"), "keys": props.get("KEYS"),
        "properties": props,
    }


_LOCK_TIMEOUT_LINE = b"get timed_mutex timeout"


class _ClientLogs:
    """Where each of the client's log files (under the peer's HOME) ended when last marked, so a
    failed send reads only what the client logged during it, not every log file again."""

    def __init__(self) -> None:
        self._ends: dict[str, int] = {}

    @staticmethod
    def _files() -> list[str]:
        return [os.path.join(root, name)
                for root, _dirs, files in os.walk(os.path.join(os.path.expanduser("~"), "logs"))
                for name in files]

    def mark(self) -> None:
        ends = {}
        for path in self._files():
            try:
                ends[path] = os.path.getsize(path)
            except OSError:
                continue
        self._ends = ends

    def logged_since_mark(self, needle: bytes) -> bool:
        for path in self._files():
            start = self._ends.get(path, 0)
            try:
                with open(path, "rb") as f:
                    if f.seek(0, os.SEEK_END) < start:
                        start = 0  # rotated or truncated since the mark: all of it is new
                    f.seek(start)
                    if needle in f.read():
                        return True
            except OSError:
                continue
        return False


def _send_sync(producer: Producer, msg: Message, logs: _ClientLogs) -> Any:
    """``send_sync``, tried again (at most twice) only when it failed because this client could not
    take its own transport table lock: its route and broker addresses were there (it tried each
    broker by name), but a thread of its own held the lock while connecting (seen under load just
    after start, every attempt failing within 1 ms and the call reporting "No route info"). Any
    other failure, or the same one a third time, is the peer's error as before."""
    for attempt in range(3):
        logs.mark()
        try:
            return producer.send_sync(msg)
        except ProducerSendSyncFailed as e:
            if attempt == 2 or not logs.logged_since_mark(_LOCK_TIMEOUT_LINE):
                raise
            emit({"event": "send-retry", "message": str(e), "cause": "client transport lock timed out"})
            time.sleep(0.5)
    raise AssertionError("unreachable")


def produce(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    producer = Producer(args.group or f"rmqwire_cpp_producer_{os.getpid()}", timeout=5000)
    producer.set_namesrv_addr(args.namesrv)
    # The C++ client compresses bodies over 4 KiB by default; without --compress keep them raw,
    # like the other peers. (Symbol present in the bundled library, not wrapped by the package.)
    dll.SetProducerCompressMsgBodyOverHowmuch.argtypes = [ctypes.c_void_p, ctypes.c_int]
    dll.SetProducerCompressMsgBodyOverHowmuch(producer._handle, 4 * 1024 if args.compress else 2**31 - 1)
    producer.start()
    emit({"event": "started", "startMs": int((time.monotonic() - t0) * 1000)})
    failures = 0
    logs = _ClientLogs()
    try:
        if args.mode in ("sync", "delay", "ordered", "oneway"):
            for i in range(args.count):
                msg, body, props = build(args, i)
                if args.mode == "oneway":
                    producer.send_oneway(msg)
                    emit(sent_record(i, args, body, props, _uniq_key(msg), None, "ONEWAY"))
                    continue
                if args.mode == "ordered":
                    q = args.queue
                    r = producer.send_orderly(msg, q, queue_selector=lambda n, _m, _a: q % n)
                else:
                    r = _send_sync(producer, msg, logs)
                emit(sent_record(i, args, body, props, r.msg_id, r.offset, _status(r.status)))
        elif args.mode == "async":
            failures = _produce_async(producer, args)
        elif args.mode == "batch":
            # Measured against the official 5.3.3 broker: this binding's SendBatchMessage stores
            # the whole encoded batch as ONE message (tags, keys and bodies lost, cf.
            # apache/rocketmq-client-python#120). A peer must not report sends that did not happen.
            raise UsageError("batch send of rocketmq 0.4.4 is broken (stores one message); not offered")
        else:
            raise UsageError(f"unknown produce mode {args.mode}")
    finally:
        producer.shutdown()
    emit({"event": "done", "elapsedMs": int((time.monotonic() - t0) * 1000)})
    return 0 if failures == 0 else 2


def _uniq_key(msg: Message) -> str | None:
    """The id the client stamped on a message it sent (oneway sends return no result)."""
    v = dll.GetMessageProperty(msg._handle, b"UNIQ_KEY")
    return v.decode("ascii") if v else None


def _status(s: SendStatus) -> str:
    return "SEND_OK" if s == SendStatus.OK else s.name


def _produce_async(producer: Producer, args: argparse.Namespace) -> int:
    done = threading.Semaphore(0)
    failed = [0]
    keep = []  # Message objects must outlive the native call

    for i in range(args.count):
        msg, body, props = build(args, i)
        keep.append(msg)

        def ok(r, i=i, body=body, props=props):
            emit(sent_record(i, args, body, props, r.msg_id, r.offset, _status(r.status)))
            done.release()

        def bad(exc, i=i):
            failed[0] += 1
            emit({"event": "send-failed", "index": i, "message": str(exc)})
            done.release()

        producer.send_async(msg, ok, bad)
    for _ in range(args.count):
        if not done.acquire(timeout=60):
            emit({"event": "error", "message": "async sends did not complete within 60 s"})
            return 1
    return failed[0]


def consume(args: argparse.Namespace) -> int:
    if args.mode != "push":
        raise UsageError("the C++ peer only has a push consumer")
    model = MessageModel.BROADCASTING if args.model == "broadcast" else MessageModel.CLUSTERING
    group = args.group or f"rmqwire_cpp_consumer_{os.getpid()}"
    t0 = time.monotonic()
    consumer = PushConsumer(group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    prop_names = ["UNIQ_KEY", "TAGS", "KEYS", *[p for p in args.prop_names.split(",") if p]]
    received = [0]
    all_done = threading.Event()
    count_lock = threading.Lock()

    def on_message(m) -> None:
        body = m.body or b""
        props = {}
        for name in prop_names:
            v = m.get_property(name)
            if v:
                props[name] = v.decode("utf-8", errors="replace")
        try:
            text: str | None = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        emit({
            "msgId": m.id, "offsetMsgId": None, "topic": m.topic,
            "queue": {"topic": m.topic, "brokerName": None, "queueId": m.queue_id},
            "queueOffset": m.queue_offset, "commitLogOffset": m.commit_log_offset,
            "bodySha256": hashlib.sha256(body).hexdigest(), "bodySize": len(body),
            "bodyEncoding": "utf8" if text is not None else "base64",
            "body": text if text is not None else base64.b64encode(body).decode("ascii"),
            "tags": props.get("TAGS"), "keys": props.get("KEYS"), "properties": props,
            "reconsumeTimes": m.reconsume_times, "bornHost": None, "storeHost": None,
            "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp,
            "storeSize": m.store_size,
        })
        with count_lock:
            received[0] += 1
            if received[0] >= args.count:
                all_done.set()

    consumer.subscribe(args.topic, on_message, args.sub)
    consumer.start()
    emit({"event": "started", "startMs": int((time.monotonic() - t0) * 1000), "group": group})
    ok = all_done.wait(args.timeout_ms / 1000)
    consumer.shutdown()
    emit({"event": "done" if ok else "timeout", "elapsedMs": int((time.monotonic() - t0) * 1000),
          "received": received[0]})
    return 0 if ok else 3


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="peer.py")
    p.add_argument("command", choices=["produce", "consume"])
    p.add_argument("--namesrv", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--mode")
    p.add_argument("--tag")
    p.add_argument("--keys")
    p.add_argument("--prop", action="append", default=[])
    p.add_argument("--body")
    p.add_argument("--body-size", type=int)
    p.add_argument("--compress", action="store_true")
    p.add_argument("--group")
    p.add_argument("--queue", type=int, default=0)
    p.add_argument("--delay-level", type=int, default=1)
    p.add_argument("--model", choices=["cluster", "broadcast"], default="cluster")
    p.add_argument("--orderly", action="store_true")
    p.add_argument("--from", dest="from_where", choices=["first", "last"], default="first")
    p.add_argument("--timeout-ms", type=int, default=60000)
    p.add_argument("--sub", default="*")
    p.add_argument("--prop-names", default="")
    a = p.parse_args(argv)
    if a.mode is None:
        a.mode = "sync" if a.command == "produce" else "push"
    if a.body is not None and a.body_size is not None:
        p.error("give --body or --body-size, not both")
    for kv in a.prop:
        if "=" not in kv or kv.startswith("="):
            p.error(f"--prop needs k=v, got {kv}")
    return a


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        return produce(args) if args.command == "produce" else consume(args)
    except UsageError as e:
        print(f"peer: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - report any client failure as an event, exit 2
        import traceback

        traceback.print_exc()
        emit({"event": "error", "message": repr(e)})
        return 2


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    _OUT.flush()
    # Native client threads can block interpreter shutdown (a known issue of this binding).
    os._exit(rc)
