"""The Admin API: the operations of Java's ``DefaultMQAdminExt`` (snake_case), typed results.

``Admin`` is the blocking facade (``with Admin(namesrv_addr="127.0.0.1:9876") as admin: ...``);
``AdminCore`` is the Twisted core it runs in the reactor thread (Deferreds of the same results).
"""

from __future__ import annotations

from rmqwire.admin.blocking import Admin
from rmqwire.admin.core import DEFAULT_TIMEOUT, AdminCore
from rmqwire.admin.types import (
    AdminError,
    MessageTrack,
    PullResult,
    PullStatus,
    QueryResult,
    RollbackStats,
    TrackType,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "Admin",
    "AdminCore",
    "AdminError",
    "MessageTrack",
    "PullResult",
    "PullStatus",
    "QueryResult",
    "RollbackStats",
    "TrackType",
]
