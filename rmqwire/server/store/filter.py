"""Pull-time message filters (Java ``MessageFilter``, ``ExpressionMessageFilter`` for TAG)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from rmqwire.codec.java import java_string_hash

__all__ = ["MessageFilter", "TagsMessageFilter"]


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """Decide from the consume-queue entry alone (None: the entry has no usable code)."""

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        """Decide from the stored record (SQL92 filters; TAG filters accept everything here)."""


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


@dataclass(frozen=True, slots=True)
class TagsMessageFilter:
    """A TAG subscription: ``code_set`` holds the tags' ``String.hashCode`` values as the client
    sends them (``SubscriptionData.codeSet``); None means ``*``. Java compares the entry's tags code
    narrowed to int."""

    code_set: frozenset[int] | None = None

    @classmethod
    def from_tags(cls, tags: Iterable[str] | None) -> TagsMessageFilter:
        if tags is None:
            return cls(None)
        tags = [t for t in tags if t]
        if not tags or "*" in tags:
            return cls(None)
        return cls(frozenset(java_string_hash(t) for t in tags))

    @classmethod
    def from_expression(cls, expression: str | None) -> TagsMessageFilter:
        """``"TagA || TagB"``; empty or ``*`` subscribes to everything."""
        if expression is None or not expression.strip() or expression.strip() == "*":
            return cls(None)
        return cls.from_tags(t.strip() for t in expression.split("||"))

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if tags_code is None or self.code_set is None:
            return True
        return _int32(tags_code) in self.code_set

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True
