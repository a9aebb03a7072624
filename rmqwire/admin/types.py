"""Typed results of the Admin API that have no wire body of their own (Java ``tools.admin.api``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rmqwire.codec.message import MessageExt
from rmqwire.errors import RmqwireError


class AdminError(RmqwireError):
    """An admin operation could not be done (Java's ``MQClientException`` raised by the tools).

    ``response_code`` is Java's code for it (a ResponseCode, or -1).
    """

    def __init__(self, message: str, *, response_code: int = -1) -> None:
        super().__init__(message)
        self.response_code = response_code


class TrackType(enum.Enum):
    """``tools.admin.api.TrackType``: what a consumer group did with a message."""

    CONSUMED = 0
    CONSUMED_BUT_FILTERED = 1
    PULL = 2
    NOT_CONSUME_YET = 3
    NOT_ONLINE = 4
    CONSUME_BROADCASTING = 5
    UNKNOWN = 6


@dataclass(slots=True)
class MessageTrack:
    consumer_group: str
    track_type: TrackType = TrackType.UNKNOWN
    exception_desc: str | None = None

    def __str__(self) -> str:
        # Java's MessageTrack.toString, which mqadmin prints.
        return (f"MessageTrack [consumerGroup={self.consumer_group}, trackType="
                f"{self.track_type.name}, exceptionDesc="
                f"{'null' if self.exception_desc is None else self.exception_desc}]")


@dataclass(slots=True)
class QueryResult:
    """Messages found by key or unique key, and the newest index update time of the brokers."""

    index_last_update_timestamp: int
    messages: list[MessageExt] = field(default_factory=list)


class PullStatus(enum.Enum):
    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


@dataclass(slots=True)
class RollbackStats:
    """One queue of a reset done the old way (offsets written by the tool, consumer offline)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int
