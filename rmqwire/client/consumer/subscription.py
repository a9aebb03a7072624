"""Subscriptions: what a consumer asks for (Java ``MessageSelector``, ``FilterAPI``, the retry
topic), and the client-side tag check that follows the broker's hash filter."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from rmqwire.client.config import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqwire.codec.commands.heartbeat import SubscriptionData, build_subscription_data
from rmqwire.codec.message import MessageExt
from rmqwire.model import ExpressionType

__all__ = [
    "SUB_ALL",
    "MessageSelector",
    "dlq_topic",
    "filter_by_tags",
    "is_retry_topic",
    "retry_topic",
    "subscription_for",
]

#: Java ``SubscriptionData.SUB_ALL``.
SUB_ALL = "*"


@dataclasses.dataclass(frozen=True, slots=True)
class MessageSelector:
    """Java ``MessageSelector``: a tag expression (``"TagA || TagB"``, ``"*"``) or a SQL92
    expression on message properties (the broker needs ``enablePropertyFilter=true``)."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str | None = SUB_ALL) -> MessageSelector:
        return cls(ExpressionType.TAG, expression or SUB_ALL)

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        return cls(ExpressionType.SQL92, sql)


def subscription_for(topic: str, selector: MessageSelector | str | None) -> SubscriptionData:
    """Java ``FilterAPI.build`` / ``buildSubscriptionData`` for a selector or a tag expression."""
    if selector is None or isinstance(selector, str):
        return build_subscription_data(topic, selector or SUB_ALL, ExpressionType.TAG)
    if selector.expression_type == ExpressionType.TAG:
        return build_subscription_data(topic, selector.expression or SUB_ALL, ExpressionType.TAG)
    return build_subscription_data(topic, selector.expression, selector.expression_type)


def retry_topic(group: str) -> str:
    """Java ``MixAll.getRetryTopic``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """Java ``MixAll.getDLQTopic``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def filter_by_tags(msgs: Iterable[MessageExt], sd: SubscriptionData) -> list[MessageExt]:
    """The broker filters by tag hash only: keep the messages whose TAGS string is subscribed
    (Java ``PullAPIWrapper.processPullResult``; class-filter and SQL92 subscriptions pass)."""
    tags = sd.tags_set
    if not tags or sd.class_filter_mode:
        return list(msgs)
    wanted = set(tags)
    return [m for m in msgs if m.properties.get("TAGS") in wanted]
