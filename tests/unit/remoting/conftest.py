"""Fixtures for the remoting tests: captured Twisted log events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from twisted.logger import LogLevel, globalLogPublisher


class LogCapture:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def at(self, level: LogLevel) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("log_level") == level]

    def formats(self, level: LogLevel) -> list[str]:
        return [e.get("log_format", "") for e in self.at(level)]


@pytest.fixture
def log_events() -> Iterator[LogCapture]:
    capture = LogCapture()
    globalLogPublisher.addObserver(capture)
    try:
        yield capture
    finally:
        globalLogPublisher.removeObserver(capture)
