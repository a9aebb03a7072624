"""The options of the ``rocketmq`` data source, parsed and checked once on the driver.

Names follow Spark's Kafka source where Kafka has the concept (``startingOffsets``,
``maxOffsetsPerTrigger``, ``minPartitions``, ...); keys are case-insensitive, as Spark's are.
A bad option fails with a ValueError naming it, before any task runs.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from rmqwire.model import MessageQueue
from rmqwire.spark.offsets import EARLIEST, LATEST, Offsets, parse_json_offsets

#: rocketmq-spark's pull defaults: 32 messages a pull (also the broker's
#: maxTransferCountOnMessageInMemory), 3 s a pull.
DEFAULT_PULL_BATCH_SIZE = 32
DEFAULT_PULL_TIMEOUT_MS = 3_000
#: A send's whole budget in the sink: Java's 3 s is for one message, a task has many in flight.
DEFAULT_SEND_TIMEOUT_MS = 30_000
#: Kafka's ``maxTriggerDelay`` default.
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

_READ = ["nameServer", "namesrvAddr", "topic", "topicPattern", "assign", "subExpression",
         "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp", "endingOffsets",
         "endingTimestamp", "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
         "maxTriggerDelay", "minPartitions", "pullBatchSize", "pullTimeoutMs", "commitOffsetsToGroup",
         "accessKey", "secretKey", "useTLS", "systemProperties", "path"]
_WRITE = ["nameServer", "namesrvAddr", "topic", "producerGroup", "sendTimeoutMs", "retryTimes",
          "maxMessageSize", "accessKey", "secretKey", "useTLS", "path"]
READ_OPTIONS = {k.lower() for k in _READ}
WRITE_OPTIONS = {k.lower() for k in _WRITE}
#: lower-cased key -> the documented spelling, for messages
_NAME = {k.lower(): k for k in _READ + _WRITE}

GROUP_REFUSED = (
    "option 'group' is not supported: the source keeps its offsets in Spark's checkpoint and "
    "pulls queues by offset without joining a consumer group; use 'commitOffsetsToGroup' to "
    "publish the progress of each completed batch to a group for monitoring")


def lower_keys(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    v = opts.get(key)
    if v is None:
        return default
    if v.strip().lower() in ("true", "1", "yes"):
        return True
    if v.strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"option {_NAME.get(key, key)!r} must be true or false, not {v!r}")


def _int(opts: Mapping[str, str], key: str, default: int | None, *, minimum: int = 1) -> int | None:
    v = opts.get(key)
    if v is None or v == "":
        return default
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"option {_NAME.get(key, key)!r} must be an integer, not {v!r}") from None
    if n < minimum:
        raise ValueError(f"option {_NAME.get(key, key)!r} must be >= {minimum}, not {n}")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def _duration_ms(opts: Mapping[str, str], key: str, default: int) -> int:
    v = opts.get(key)
    if v is None:
        return default
    m = _DURATION.match(v)
    if not m:
        raise ValueError(f"option {_NAME.get(key, key)!r} must be a duration such as 30s, 5m or 1000ms, not {v!r}")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "").lower() or None]


@dataclasses.dataclass(frozen=True)
class Connection:
    """How to reach the cluster; picklable, so executors build their own clients from it."""

    namesrv_addr: str
    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    use_tls: bool = False

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> Connection:
        addr = opts.get("nameserver") or opts.get("namesrvaddr")
        if not addr:
            raise ValueError("option 'nameServer' is required (host:port[;host:port])")
        ak, sk = opts.get("accesskey"), opts.get("secretkey")
        if bool(ak) != bool(sk):
            raise ValueError("options 'accessKey' and 'secretKey' go together")
        return cls(addr, ak or None, sk or None, _bool(opts, "usetls", False))

    def client_options(self) -> dict[str, Any]:
        """``ClientConfig`` keyword arguments (QueuePuller, Producer)."""
        return {"access_key": self.access_key, "secret_key": self.secret_key, "use_tls": self.use_tls}


@dataclasses.dataclass(frozen=True)
class Subscription:
    """Exactly one of ``topics``, ``pattern`` or ``assign``."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[MessageQueue, ...] = ()

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> Subscription:
        given = [k for k in ("topic", "topicpattern", "assign") if opts.get(k)]
        if len(given) != 1:
            raise ValueError("give exactly one of the options 'topic' (comma list), 'topicPattern' "
                             f"(regex) or 'assign' (JSON of queues); got {given or 'none'}")
        if given[0] == "topic":
            topics = tuple(t.strip() for t in opts["topic"].split(",") if t.strip())
            if not topics:
                raise ValueError("option 'topic' names no topic")
            return cls(topics=topics)
        if given[0] == "topicpattern":
            try:
                re.compile(opts["topicpattern"])
            except re.error as e:
                raise ValueError(f"option 'topicPattern' is not a regular expression: {e}") from None
            return cls(pattern=opts["topicpattern"])
        return cls(assign=tuple(sorted(parse_assign(opts["assign"]))))


def parse_assign(text: str) -> list[MessageQueue]:
    """``{"topic": {"brokerName": [0, 1]}}`` (Kafka's ``{"topic": [0, 1]}`` with a broker level)."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"option 'assign' is not JSON: {e}") from None
    out = []
    ok = isinstance(d, dict)
    for topic, brokers in (d.items() if ok else ()):
        ok = ok and isinstance(brokers, dict)
        for broker, qids in (brokers.items() if isinstance(brokers, dict) else ()):
            if not isinstance(qids, list) or not all(type(q) is int and q >= 0 for q in qids):
                ok = False
                break
            out.extend(MessageQueue(topic, broker, q) for q in qids)
    if not ok or not out:
        raise ValueError('option \'assign\' must be {"topic": {"brokerName": [queueId, ...]}}, '
                         f"not {text!r}")
    return out


@dataclasses.dataclass(frozen=True)
class Position:
    """Where reading starts or ends: ``"earliest"``/``"latest"``, per-queue offsets (with the
    −2/−1 sentinels) or a timestamp (one for all queues, or per queue)."""

    kind: str  # earliest | latest | offsets | timestamp | timestamps
    offsets: tuple[tuple[MessageQueue, int], ...] = ()
    timestamp: int | None = None

    @property
    def offset_map(self) -> Offsets:
        return dict(self.offsets)


def _position(opts: Mapping[str, str], prefix: str, default: str) -> Position:
    """Kafka's precedence: ``<prefix>Timestamp`` > ``<prefix>OffsetsByTimestamp`` > ``<prefix>Offsets``."""
    ts = opts.get(f"{prefix}timestamp")
    if ts:
        try:
            return Position("timestamp", timestamp=int(ts))
        except ValueError:
            raise ValueError(f"option '{prefix}Timestamp' must be epoch milliseconds, not {ts!r}") from None
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts:
        return Position("timestamps", tuple(sorted(
            parse_json_offsets(by_ts, f"{prefix}OffsetsByTimestamp").items())))
    v = (opts.get(f"{prefix}offsets") or default).strip()
    if v.lower() in ("earliest", "latest"):
        return Position(v.lower())
    return Position("offsets", tuple(sorted(parse_json_offsets(v, f"{prefix}Offsets").items())))


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    connection: Connection
    subscription: Subscription
    sub_expression: str = "*"
    starting: Position = Position("earliest")
    ending: Position = Position("latest")
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE
    pull_timeout_ms: int = DEFAULT_PULL_TIMEOUT_MS
    commit_offsets_to_group: str | None = None
    system_properties: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool) -> ReadOptions:
        opts = lower_keys(options)
        if "group" in opts:
            raise ValueError(GROUP_REFUSED)
        unknown = sorted(set(opts) - READ_OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) of the rocketmq source: {', '.join(unknown)}")
        starting = _position(opts, "starting", "latest" if streaming else "earliest")
        if streaming:
            for k in ("endingoffsets", "endingtimestamp"):
                if k in opts:
                    raise ValueError(f"option {_NAME[k]!r} is for batch queries only")
            ending = Position("latest")
        else:
            if starting.kind == "latest":
                raise ValueError("startingOffsets='latest' is not allowed for a batch query")
            if any(o == LATEST for _, o in starting.offsets):
                raise ValueError("startingOffsets −1 (latest) is not allowed for a batch query")
            ending = _position(opts, "ending", "latest")
            if ending.kind == "earliest" or any(o == EARLIEST for _, o in ending.offsets):
                raise ValueError("endingOffsets 'earliest' (−2) is not allowed")
            if ending.kind == "timestamps":
                raise ValueError("give 'endingTimestamp' or 'endingOffsets'")
        return cls(
            connection=Connection.parse(opts),
            subscription=Subscription.parse(opts),
            sub_expression=(opts.get("subexpression") or "*").strip() or "*",
            starting=starting,
            ending=ending,
            fail_on_data_loss=_bool(opts, "failondataloss", True),
            max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", None),
            min_offsets_per_trigger=_int(opts, "minoffsetspertrigger", None),
            max_trigger_delay_ms=_duration_ms(opts, "maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
            min_partitions=_int(opts, "minpartitions", None),
            pull_batch_size=_int(opts, "pullbatchsize", DEFAULT_PULL_BATCH_SIZE) or DEFAULT_PULL_BATCH_SIZE,
            pull_timeout_ms=_int(opts, "pulltimeoutms", DEFAULT_PULL_TIMEOUT_MS) or DEFAULT_PULL_TIMEOUT_MS,
            commit_offsets_to_group=opts.get("commitoffsetstogroup") or None,
            system_properties=_bool(opts, "systemproperties", False),
        )


@dataclasses.dataclass(frozen=True)
class WriteOptions:
    connection: Connection
    topic: str | None = None
    producer_group: str | None = None
    send_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    retry_times: int = 2
    max_message_size: int = 4 * 1024 * 1024

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> WriteOptions:
        opts = lower_keys(options)
        unknown = sorted(set(opts) - WRITE_OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) of the rocketmq sink: {', '.join(unknown)}")
        return cls(
            connection=Connection.parse(opts),
            topic=opts.get("topic") or None,
            producer_group=opts.get("producergroup") or None,
            send_timeout_ms=_int(opts, "sendtimeoutms", DEFAULT_SEND_TIMEOUT_MS) or DEFAULT_SEND_TIMEOUT_MS,
            retry_times=_int(opts, "retrytimes", 2, minimum=0) or 0,
            max_message_size=_int(opts, "maxmessagesize", 4 * 1024 * 1024) or 4 * 1024 * 1024,
        )
