"""A test helper: keep the reactor thread busy, so calls from other threads can only queue."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def held_reactor(reactor: Any, wait: float = 30.0) -> Iterator[None]:
    """Inside the block the reactor thread waits (for at most ``wait`` s) in one call."""
    release, busy = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(wait)

    reactor.callFromThread(hold)
    if not busy.wait(wait):
        raise AssertionError("the reactor thread did not turn")
    try:
        yield
    finally:
        release.set()
