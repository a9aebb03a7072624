"""Waiting on a condition from trial tests on the real reactor (never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from twisted.internet import defer, task


@defer.inlineCallbacks
def wait_until(reactor: Any, probe: Callable[[], Any], what: str, timeout: float = 30.0,
               interval: float = 0.2) -> Any:
    """Call ``probe`` (returning a value or a Deferred) until it gives a truthy value, which is
    returned; fail with AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = yield defer.maybeDeferred(probe)
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        yield task.deferLater(reactor, interval, lambda: None)
