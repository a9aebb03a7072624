"""Fixtures of the NameServer unit tests (helpers live in namesrv_helpers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from namesrv_helpers import Namesrv, make_namesrv
from twisted.logger import globalLogPublisher


@pytest.fixture
def namesrv(tmp_path) -> Namesrv:
    return make_namesrv(kv_path=tmp_path / "kvConfig.json")


class LogCapture:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def formats(self) -> list[str]:
        return [e.get("log_format", "") for e in self.events]


@pytest.fixture
def ns_log() -> Iterator[LogCapture]:
    capture = LogCapture()
    globalLogPublisher.addObserver(capture)
    try:
        yield capture
    finally:
        globalLogPublisher.removeObserver(capture)


