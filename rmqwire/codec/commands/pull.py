"""Pulling: PULL_MESSAGE and LITE_PULL_MESSAGE."""

from __future__ import annotations

import dataclasses
import enum

from rmqwire.codec.codes import DEFAULT_VERSION, LanguageCode, RequestCode, ResponseCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.frame import PreparedRequest, RemotingCommand, json_request_template
from rmqwire.codec.header import (
    CommandHeader,
    TopicQueueRequestHeader,
    jfield,
)


class PullSysFlag(enum.IntFlag):
    """Bits of ``PullMessageRequestHeader.sysFlag`` (wire-format.md section 8.6)."""

    COMMIT_OFFSET = 0x01
    SUSPEND = 0x02
    SUBSCRIPTION = 0x04
    CLASS_FILTER = 0x08
    LITE_PULL = 0x10

    @classmethod
    def build(
        cls,
        *,
        commit_offset: bool = False,
        suspend: bool = False,
        subscription: bool = False,
        class_filter: bool = False,
        lite_pull: bool = False,
    ) -> PullSysFlag:
        key = (commit_offset, suspend, subscription, class_filter, lite_pull)
        flag = _BUILT.get(key)
        if flag is None:  # IntFlag arithmetic is slow and a consumer builds one per pull
            flag = _BUILT[key] = cls._build(*key)
        return flag

    @classmethod
    def _build(
        cls, commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool, lite_pull: bool
    ) -> PullSysFlag:
        flag = cls(0)
        if commit_offset:
            flag |= cls.COMMIT_OFFSET
        if suspend:
            flag |= cls.SUSPEND
        if subscription:
            flag |= cls.SUBSCRIPTION
        if class_filter:
            flag |= cls.CLASS_FILTER
        if lite_pull:
            flag |= cls.LITE_PULL
        return flag

    @classmethod
    def clear_commit_offset(cls, sys_flag: int) -> int:
        """What the Java client does before pulling from a slave."""
        return int(sys_flag) & ~int(cls.COMMIT_OFFSET)  # int & IntFlag would give an IntFlag


_BUILT: dict[tuple[bool, bool, bool, bool, bool], PullSysFlag] = {}


class PullMessageRequestHeader(TopicQueueRequestHeader):
    """PULL_MESSAGE (11), LITE_PULL_MESSAGE (361). ``sys_flag`` holds PullSysFlag bits."""

    consumer_group: str | None = jfield("String", required=True)
    topic: str | None = jfield("String", required=True)
    queue_id: int | None = jfield("Integer", required=True)
    queue_offset: int | None = jfield("Long", required=True)
    max_msg_nums: int | None = jfield("Integer", required=True)
    sys_flag: int | None = jfield("Integer", required=True)
    commit_offset: int | None = jfield("Long", required=True)
    suspend_timeout_millis: int | None = jfield("Long", required=True)
    subscription: str | None = jfield("String")
    sub_version: int | None = jfield("Long", required=True)
    expression_type: str | None = jfield("String")
    max_msg_bytes: int | None = jfield("Integer")  # 5.x
    request_source: int | None = jfield("Integer")  # 5.x
    proxy_forward_client_id: str | None = jfield("String", wire="proxyFrowardClientId")  # sic


class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int | None = jfield("Long", required=True)
    next_begin_offset: int | None = jfield("Long", required=True)
    min_offset: int | None = jfield("Long", required=True)
    max_offset: int | None = jfield("Long", required=True)
    offset_delta: int | None = jfield("Long")  # 5.x
    topic_sys_flag: int | None = jfield("Integer")  # 5.x
    group_sys_flag: int | None = jfield("Integer")  # 5.x
    forbidden_type: int | None = jfield("Integer")  # 5.x


# ---- commands -----------------------------------------------------------------------------------


class PullMessage(Command):
    """The response body is the pulled stored records (``rmqwire.codec.message.decode_messages``);
    not-found, retry and offset-moved answers are outcomes the pull loop handles."""

    code = RequestCode.PULL_MESSAGE
    header = PullMessageRequestHeader
    response_header = PullMessageResponseHeader
    response_body = bytes
    statuses = frozenset(
        {
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        }
    )


class LitePullMessage(PullMessage):
    code = RequestCode.LITE_PULL_MESSAGE


#: The fields of a queue's pulls that change from one pull to the next.
PULL_OPEN_FIELDS = ("queueOffset", "sysFlag", "commitOffset")


class PullRequestTemplate:
    """One queue's pull requests, framed once: the typed request (``command.request`` of
    ``header``) as a JSON template whose queue offset, sysFlag, commit offset and opaque are
    filled per pull; any other change of the header needs another template."""

    __slots__ = ("command", "header", "language", "version", "_template", "_order", "_natural")

    def __init__(self, command: type[PullMessage], header: PullMessageRequestHeader, *,
                 language: LanguageCode = LanguageCode.PYTHON, version: int = DEFAULT_VERSION) -> None:
        self.command = command
        self.header = header
        self.language = language
        self.version = version
        self._template, self._order = json_request_template(
            command.request(header, language=language, version=version), PULL_OPEN_FIELDS)
        self._natural = self._order == PULL_OPEN_FIELDS  # else `extra` put a key first

    def request(self, queue_offset: int, sys_flag: int, commit_offset: int) -> PreparedRequest:
        if not (type(queue_offset) is int and type(sys_flag) is int and type(commit_offset) is int):
            raise TypeError("queue offset, sysFlag and commit offset must be ints")
        if self._natural:
            values: tuple[int, ...] = (queue_offset, sys_flag, commit_offset)
        else:
            given = {"queueOffset": queue_offset, "sysFlag": sys_flag, "commitOffset": commit_offset}
            values = tuple(given[k] for k in self._order)

        def command() -> RemotingCommand:
            header = dataclasses.replace(self.header, queue_offset=queue_offset, sys_flag=sys_flag,
                                         commit_offset=commit_offset)
            return self.command.request(header, language=self.language, version=self.version)

        return PreparedRequest(self.command.code, self._template, values, command)

