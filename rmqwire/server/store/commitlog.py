"""The commit log: every message of every topic, appended to memory-mapped segments.

Records use the stored-message layout of ``rmqwire.codec.message`` (wire-format.md section 10.4).
The encoder builds a record once, outside the put lock, with zero queue offset, physical offset and
store time; the append writes it into the segment and patches those three fields in place, as
Java's ``DefaultAppendMessageCallback`` patches its pre-encoded buffer. A record that does not fit
the rest of a segment leaves the 8-byte blank end-of-file record (size, BLANK magic) and goes to
the next segment.

``check_message_and_return_size`` is the reading side used by recovery and the dispatcher: Java's
``CommitLog.checkMessageAndReturnSize`` on a buffer and position, without decoding the body.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rmqwire.codec.java import java_string_hash
from rmqwire.codec.message import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    MessageSysFlag,
    PropertyKey,
    decode_properties,
)
from rmqwire.server.store.config import MessageStoreConfig
from rmqwire.server.store.mapped_file import MappedFile, MappedFileQueue
from rmqwire.server.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    DispatchRequest,
)

__all__ = [
    "END_FILE_MIN_BLANK_LENGTH",
    "CommitLog",
    "PendingRecords",
    "check_message_and_return_size",
    "store_timestamp_position",
    "tags_code_of",
    "tags_hash_cached",
]

log = logging.getLogger(__name__)

#: Room always kept at the end of a segment for the blank record.
END_FILE_MIN_BLANK_LENGTH = 4 + 4
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
SYSFLAG_POSITION = 36
_BORN_V6 = int(MessageSysFlag.BORNHOST_V6)
_STORE_V6 = int(MessageSysFlag.STOREHOSTADDRESS_V6)
_TRAN_MASK = 0xC
_TRAN_PREPARED = 0x4
_TRAN_ROLLBACK = 0xC

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_BLANK = struct.Struct(">ii")
# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
_HEAD = struct.Struct(">iiiiiqqiq")
_Q_AND_PHYS = struct.Struct(">qq")
#: Tags repeat a lot; their hash is computed once (bounded, so hostile tags cannot grow it).
tags_hash_cached = functools.lru_cache(maxsize=4096)(java_string_hash)


def store_timestamp_position(sys_flag: int) -> int:
    """Offset of STORETIMESTAMP in a record: after the born host (IPv4 8 bytes, IPv6 20)."""
    return 48 + (20 if sys_flag & _BORN_V6 else 8)


def tags_code_of(
    topic: str,
    properties: Mapping[str, str] | None,
    store_timestamp: int,
    delay_levels: Mapping[int, int],
) -> int:
    """The consume-queue tags code: ``String.hashCode(TAGS)``, 0 without tags; for
    SCHEDULE_TOPIC_XXXX records with a DELAY level, the delivery time instead.
    Raises ValueError for a non-numeric DELAY there, as Java's ``Integer.parseInt`` throws."""
    if not properties:
        return 0
    tags = properties.get(PropertyKey.TAGS)
    code = tags_hash_cached(tags) if tags else 0
    if topic == SCHEDULE_TOPIC:
        t = properties.get(PropertyKey.DELAY_TIME_LEVEL)
        if t is not None:
            level = _parse_java_int(t)
            max_level = max(delay_levels) if delay_levels else 0
            level = min(level, max_level)
            if level > 0:
                code = store_timestamp + delay_levels.get(level, 1000)
    return code


def _parse_java_int(s: str) -> int:
    # Integer.parseInt: optional sign, ASCII digits only, 32-bit range
    body = s[1:] if s[:1] in "+-" else s
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(s)
    v = int(s)
    if not -(2**31) <= v < 2**31:
        raise ValueError(s)
    return v


def check_message_and_return_size(
    buf: bytes | bytearray | memoryview | object,
    pos: int,
    end: int,
    *,
    check_crc: bool,
    delay_levels: Mapping[int, int],
) -> DispatchRequest:
    """Check the record at ``pos`` (``end`` bounds the readable bytes) and describe it.

    Java's outcomes: ``msg_size`` 0 + success for the blank end-of-file record; -1 + failure for
    bytes that are not a record (short, bad magic, CRC mismatch, unparsable); TOTALSIZE + failure
    when the fields do not add up to TOTALSIZE.
    """
    fail = DispatchRequest(-1, False)
    try:
        remaining = end - pos
        if remaining <= 4:
            return fail
        (total,) = _I32.unpack_from(buf, pos)
        if remaining < total:
            return fail
        if remaining < 8:
            return fail
        (magic,) = _I32.unpack_from(buf, pos + 4)
        if magic == BLANK_MAGIC_CODE:
            return DispatchRequest(0, True)
        if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
            return fail
        if total < MIN_RECORD_SIZE:
            return fail
        (
            _,
            _,
            body_crc,
            queue_id,
            _flag,
            queue_offset,
            physic_offset,
            sys_flag,
            _born_ts,
        ) = _HEAD.unpack_from(buf, pos)
        p = pos + _HEAD.size + (20 if sys_flag & _BORN_V6 else 8)
        (store_timestamp,) = _I64.unpack_from(buf, p)
        p += 8 + (20 if sys_flag & _STORE_V6 else 8) + 4
        (prepared_tx_offset,) = _I64.unpack_from(buf, p)
        p += 8
        (body_len,) = _I32.unpack_from(buf, p)
        p += 4
        if body_len > 0:
            if p + body_len > pos + total:
                return fail
            if check_crc:
                with memoryview(buf) as mv:  # type: ignore[arg-type]
                    crc = zlib.crc32(mv[p : p + body_len]) & 0x7FFFFFFF
                if crc != body_crc:
                    log.warning("CRC check failed at %d: stored %d, computed %d", physic_offset, body_crc, crc)
                    return fail
            p += body_len
        if magic == MAGIC_CODE_V2:
            (topic_len,) = _I16.unpack_from(buf, p)
            p += 2
        else:
            topic_len = buf[p]  # type: ignore[index]
            topic_len = topic_len - 256 if topic_len > 127 else topic_len
            p += 1
        if topic_len < 0 or p + topic_len > pos + total:
            return fail
        topic = bytes(buf[p : p + topic_len]).decode("utf-8", "replace")  # type: ignore[index]
        p += topic_len
        (props_len,) = _I16.unpack_from(buf, p)
        p += 2
        properties: dict[str, str] | None = None
        keys = ""
        uniq_key = None
        tags_code = 0
        if props_len > 0:
            if p + props_len > pos + total:
                return fail
            raw = bytes(buf[p : p + props_len])  # type: ignore[index]
            properties = decode_properties(raw.decode("utf-8", "replace"))
            keys = properties.get(PropertyKey.KEYS, "")
            uniq_key = properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            tags_code = tags_code_of(topic, properties, store_timestamp, delay_levels)
        read_length = (
            _HEAD.size
            + (20 if sys_flag & _BORN_V6 else 8)
            + 8
            + (20 if sys_flag & _STORE_V6 else 8)
            + 4
            + 8
            + 4
            + max(body_len, 0)
            + (2 if magic == MAGIC_CODE_V2 else 1)
            + topic_len
            + 2
            + max(props_len, 0)
        )
        if read_length != total:
            log.error("record at %d: TOTALSIZE %d but fields take %d", physic_offset, total, read_length)
            return DispatchRequest(total, False)
        return DispatchRequest(
            msg_size=total,
            success=True,
            topic=topic,
            queue_id=queue_id,
            commit_log_offset=physic_offset,
            tags_code=tags_code,
            store_timestamp=store_timestamp,
            consume_queue_offset=queue_offset,
            keys=keys,
            uniq_key=uniq_key,
            sys_flag=sys_flag,
            prepared_transaction_offset=prepared_tx_offset,
            properties=properties,
        )
    except (struct.error, IndexError, ValueError) as e:
        log.error("record check failed at position %d: %s", pos, e)
        return fail


@dataclass(slots=True)
class PendingRecords:
    """Records encoded outside the put lock, waiting to be appended as one unit."""

    data: bytes
    sizes: Sequence[int]
    sys_flag: int
    dispatch: list[DispatchRequest]  # filled in by the append (one per record, or none)


class CommitLog:
    """Segments under ``storePathCommitLog``; appends are serialized by the caller."""

    def __init__(self, config: MessageStoreConfig, sync: Callable[[int], None] = os.fdatasync) -> None:
        self.config = config
        self.mapped_file_queue = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log, sync)
        self.begin_time_in_lock = 0

    def load(self) -> None:
        self.mapped_file_queue.load()

    @property
    def file_size(self) -> int:
        return self.mapped_file_queue.file_size

    @property
    def min_offset(self) -> int:
        """Offset of the first byte still stored, -1 when there are no segments."""
        first = self.mapped_file_queue.first()
        if first is None:
            return -1
        if first.available:
            return first.file_from_offset
        return self.roll_next_file(first.file_from_offset)

    @property
    def max_offset(self) -> int:
        return self.mapped_file_queue.max_offset

    @property
    def flushed_where(self) -> int:
        return self.mapped_file_queue.flushed_where

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # -- append ----------------------------------------------------------------------------------

    def append(
        self,
        records: PendingRecords,
        first_queue_offset: int,
        store_timestamp: int,
        store_host: tuple[str, int],
    ) -> AppendMessageResult:
        """Write ``records`` at the end of the log (caller holds the put lock)."""
        total = len(records.data)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        mfq = self.mapped_file_queue
        f = mfq.last_or_create(0)
        if f is None:
            return AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
        free = f.file_size - f.wrote_position
        if total + END_FILE_MIN_BLANK_LENGTH > free:
            # Blank end-of-file record; the rest of the segment stays as it is.
            f.write_at(f.wrote_position, _BLANK.pack(free, BLANK_MAGIC_CODE))
            f.wrote_position = f.file_size
            f = mfq.last_or_create(0)
            if f is None:
                return AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
        base = f.wrote_position
        wrote_offset = f.file_from_offset + base
        mm = f.mm
        mm[base : base + total] = records.data
        ts_pos = store_timestamp_position(records.sys_flag)
        tran = records.sys_flag & _TRAN_MASK
        keep_queue_offset = tran == _TRAN_PREPARED or tran == _TRAN_ROLLBACK
        offsets = []
        rel = 0
        q = first_queue_offset
        for size in records.sizes:
            at = base + rel
            phys = wrote_offset + rel
            if keep_queue_offset:  # written as 0: these records never enter a consume queue
                _I64.pack_into(mm, at + PHYSICAL_OFFSET_POSITION, phys)
            else:
                _Q_AND_PHYS.pack_into(mm, at + QUEUE_OFFSET_POSITION, q, phys)
                q += 1
            _I64.pack_into(mm, at + ts_pos, store_timestamp)
            offsets.append(phys)
            rel += size
        f.wrote_position = base + total
        f.store_timestamp = store_timestamp
        return AppendMessageResult(
            AppendMessageStatus.PUT_OK,
            wrote_offset=wrote_offset,
            wrote_bytes=total,
            store_timestamp=store_timestamp,
            logics_offset=0 if keep_queue_offset else first_queue_offset,
            msg_num=len(records.sizes),
            record_offsets=tuple(offsets),
            store_host=store_host,
        )

    # -- reads -----------------------------------------------------------------------------------

    def get_message(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at commit-log ``offset`` if they are written (Java ``getMessage``)."""
        f = self.mapped_file_queue.find_by_offset(offset, offset == 0)
        if f is None:
            return None
        return f.read(offset % self.file_size, size)

    def find_file(self, offset: int) -> MappedFile | None:
        return self.mapped_file_queue.find_by_offset(offset, offset == 0)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """Store time of the record at ``offset`` (``size`` bytes long), -1 if not stored."""
        if offset < self.min_offset or offset + size > self.max_offset or size < 8:
            return -1
        head = self.get_message(offset, min(size, 68))
        if head is None or len(head) < 56:
            return -1
        (sys_flag,) = _I32.unpack_from(head, SYSFLAG_POSITION)
        ts_pos = store_timestamp_position(sys_flag)
        if ts_pos + 8 > len(head):
            return -1
        return _I64.unpack_from(head, ts_pos)[0]

    def message_size_at(self, offset: int) -> int | None:
        raw = self.get_message(offset, 4)
        return None if raw is None else _I32.unpack(raw)[0]

    def close(self) -> None:
        self.mapped_file_queue.close()
