"""Typed outcomes of the store: put, append, get and dispatch (Java's enums and result classes).

The enum members keep the Java names so the broker processors map them one to one onto response
codes, as ``SendMessageProcessor.handlePutMessageResult`` / ``PullMessageProcessor`` do.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

from rmqwire.codec.ids import create_offset_msg_id
from rmqwire.codec.message import decode_properties

__all__ = [
    "QueryMessageResult",
    "AppendMessageResult",
    "AppendMessageStatus",
    "DispatchBatch",
    "DispatchRequest",
    "GetMessageResult",
    "GetMessageStatus",
    "PutMessageResult",
    "PutMessageStatus",
]


class PutMessageStatus(enum.Enum):
    PUT_OK = enum.auto()
    FLUSH_DISK_TIMEOUT = enum.auto()
    FLUSH_SLAVE_TIMEOUT = enum.auto()
    SLAVE_NOT_AVAILABLE = enum.auto()
    SERVICE_NOT_AVAILABLE = enum.auto()
    CREATE_MAPPED_FILE_FAILED = enum.auto()
    MESSAGE_ILLEGAL = enum.auto()
    PROPERTIES_SIZE_EXCEEDED = enum.auto()
    OS_PAGE_CACHE_BUSY = enum.auto()
    UNKNOWN_ERROR = enum.auto()
    IN_SYNC_REPLICAS_NOT_ENOUGH = enum.auto()
    PUT_TO_REMOTE_BROKER_FAIL = enum.auto()
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = enum.auto()
    WHEEL_TIMER_FLOW_CONTROL = enum.auto()
    WHEEL_TIMER_MSG_ILLEGAL = enum.auto()
    WHEEL_TIMER_NOT_ENABLE = enum.auto()


class AppendMessageStatus(enum.Enum):
    PUT_OK = enum.auto()
    END_OF_FILE = enum.auto()
    MESSAGE_SIZE_EXCEEDED = enum.auto()
    PROPERTIES_SIZE_EXCEEDED = enum.auto()
    UNKNOWN_ERROR = enum.auto()


class GetMessageStatus(enum.Enum):
    FOUND = enum.auto()
    NO_MATCHED_MESSAGE = enum.auto()
    MESSAGE_WAS_REMOVING = enum.auto()
    OFFSET_FOUND_NULL = enum.auto()
    OFFSET_OVERFLOW_BADLY = enum.auto()
    OFFSET_OVERFLOW_ONE = enum.auto()
    OFFSET_TOO_SMALL = enum.auto()
    NO_MATCHED_LOGIC_QUEUE = enum.auto()
    NO_MESSAGE_IN_QUEUE = enum.auto()
    OFFSET_RESET = enum.auto()


@dataclasses.dataclass(slots=True)
class AppendMessageResult:
    """Where a put landed: one commit-log offset per record written (several for a batch).
    Treat as read-only (not frozen only because frozen construction costs on the put path)."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    record_offsets: tuple[int, ...] = ()
    store_host: tuple[str, int] = ("0.0.0.0", 0)

    @property
    def msg_ids(self) -> tuple[str, ...]:
        """The offset message id of each record (store host + commit-log offset)."""
        return tuple(create_offset_msg_id(self.store_host, o) for o in self.record_offsets)

    @property
    def msg_id(self) -> str:
        """The ids joined by commas, as Java's ``msgIdSupplier`` gives them for a batch."""
        return ",".join(self.msg_ids)


@dataclasses.dataclass(frozen=True, slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None

    @property
    def is_ok(self) -> bool:
        """Java ``isOk``: the record was appended (a flush timeout still counts as written)."""
        return self.append_result is not None and self.append_result.status is AppendMessageStatus.PUT_OK

    @property
    def commit_log_offset(self) -> int:
        return self.append_result.wrote_offset if self.append_result else -1

    @property
    def queue_offset(self) -> int:
        return self.append_result.logics_offset if self.append_result else -1

    @property
    def msg_id(self) -> str:
        return self.append_result.msg_id if self.append_result else ""

    @property
    def store_timestamp(self) -> int:
        return self.append_result.store_timestamp if self.append_result else 0


@dataclasses.dataclass(slots=True)
class GetMessageResult:
    """What a pull finds: raw stored records, ready to be concatenated into a PULL body."""

    status: GetMessageStatus = GetMessageStatus.NO_MESSAGE_IN_QUEUE
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    message_buffers: list[bytes] = dataclasses.field(default_factory=list)
    message_queue_offsets: list[int] = dataclasses.field(default_factory=list)
    buffer_total_size: int = 0
    message_count: int = 0
    suggest_pulling_from_slave: bool = False
    filter_message_count: int = 0

    def add_message(self, record: bytes, queue_offset: int, batch_num: int = 1) -> None:
        self.message_buffers.append(record)
        self.message_queue_offsets.append(queue_offset)
        self.buffer_total_size += len(record)
        self.message_count += batch_num

    @property
    def body(self) -> bytes:
        """The records back to back: a PULL_MESSAGE response body."""
        return b"".join(self.message_buffers)


@dataclasses.dataclass(slots=True)
class QueryMessageResult:
    """What an index query finds (QUERY_MESSAGE): raw stored records by commit-log offset, and
    how far the index reaches."""

    message_buffers: list[bytes] = dataclasses.field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.message_buffers)

    @property
    def body(self) -> bytes:
        return b"".join(self.message_buffers)


@dataclasses.dataclass(slots=True)
class DispatchRequest:
    """One commit-log record as the dispatchers (consume queue, index, long polling) see it.

    ``msg_size`` 0 with ``success`` marks the blank end-of-file record; -1 marks unreadable bytes;
    a positive size without ``success`` is a record whose fields disagree with its TOTALSIZE.
    ``consume_queue_offset + 1`` is the queue's new max offset once this record is dispatched.
    Treat as read-only: listeners share one instance.
    """

    msg_size: int
    success: bool
    topic: str = ""
    queue_id: int = 0
    commit_log_offset: int = 0
    tags_code: int = 0
    store_timestamp: int = 0
    consume_queue_offset: int = 0
    keys: str = ""
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] | None = None


@dataclasses.dataclass(slots=True)
class DispatchBatch:
    """The records of one batch put (SEND_BATCH_MESSAGE), dispatched together: one consume-queue
    write and one index loop instead of a ``DispatchRequest`` and a call chain per record.

    Record ``i`` is at ``commit_log_offsets[i]`` with ``sizes[i]`` bytes and consume-queue offset
    ``first_queue_offset + i``; all share topic, queue, sysFlag and store time.
    ``commit_log_offset`` and ``msg_size`` span the whole batch (the dispatcher's confirm-offset
    check treats it as one record). Treat as read-only.
    """

    topic: str
    queue_id: int
    sys_flag: int
    store_timestamp: int
    first_queue_offset: int
    commit_log_offsets: tuple[int, ...]
    sizes: Sequence[int]
    tags_codes: list[int]
    keys: list[str]
    uniq_keys: list[str | None]
    #: Each record's properties string as stored (decoded only for ``requests``).
    raw_properties: list[bytes]
    commit_log_offset: int = 0
    msg_size: int = 0

    @property
    def max_offset_in_queue(self) -> int:
        """The queue's max offset once the batch is dispatched."""
        return self.first_queue_offset + len(self.sizes)

    def requests(self) -> list[DispatchRequest]:
        """One ``DispatchRequest`` per record, for per-record dispatchers and listeners."""
        return [
            DispatchRequest(
                msg_size=size,
                success=True,
                topic=self.topic,
                queue_id=self.queue_id,
                commit_log_offset=off,
                tags_code=tags,
                store_timestamp=self.store_timestamp,
                consume_queue_offset=self.first_queue_offset + i,
                keys=keys,
                uniq_key=uniq,
                sys_flag=self.sys_flag,
                properties=decode_properties(raw.decode("utf-8", "replace")),
            )
            for i, (off, size, tags, keys, uniq, raw) in enumerate(
                zip(self.commit_log_offsets, self.sizes, self.tags_codes, self.keys, self.uniq_keys,
                    self.raw_properties, strict=True)
            )
        ]
