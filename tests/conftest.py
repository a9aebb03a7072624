"""Shared pytest options (kept small: fixtures live next to the tests that use them)."""

from __future__ import annotations


def pytest_addoption(parser):
    group = parser.getgroup("rmqwire")
    group.addoption(
        "--rocketmq-version",
        default=None,
        help="official Apache RocketMQ version for the reference cluster "
             "(default: env RMQWIRE_ROCKETMQ_VERSION, else 5.3.3)",
    )


# Property tests run on a shared 2-core machine beside JVMs: wall-clock deadlines only add flakes.
from hypothesis import settings  # noqa: E402

settings.register_profile("rmqwire", deadline=None)
settings.load_profile("rmqwire")
