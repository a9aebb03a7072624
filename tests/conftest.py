"""Shared pytest options (kept small: fixtures live next to the tests that use them)."""

from __future__ import annotations

import signal

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("rmqwire")
    group.addoption(
        "--rocketmq-version",
        default=None,
        help="official Apache RocketMQ version for the reference cluster "
             "(default: env RMQWIRE_ROCKETMQ_VERSION, else 5.3.3)",
    )


def pytest_configure(config):
    # crochet 2.1 calls threading.Event.isSet() in its reactor thread; not ours to fix
    config.addinivalue_line(
        "filterwarnings", r"ignore:isSet\(\) is deprecated:DeprecationWarning:crochet"
    )


def pytest_collection_modifyitems(config, items):
    # A trial TestCase spins the global reactor in the main thread and fails on a reactor that
    # crochet already runs in its own thread for the rest of the process (the blocking facade's
    # tests and the loopback tests start it). Run those first, whatever order was asked for.
    from twisted.trial.unittest import TestCase as ReactorTestCase

    def spins_reactor(item) -> bool:
        cls = getattr(item, "cls", None)
        return isinstance(cls, type) and issubclass(cls, ReactorTestCase)

    items.sort(key=lambda item: not spins_reactor(item))  # stable: otherwise unchanged


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # A trial TestCase runs the reactor in the main thread, which installs the reactor's SIGTERM and
    # SIGINT handlers and leaves them: the run then ignored both (seen: pytest went on testing after
    # SIGTERM and Ctrl-C, JVMs and all). Put back what was there before each test.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        if signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


# Property tests run on a shared 2-core machine beside JVMs: wall-clock deadlines only add flakes.
from hypothesis import settings  # noqa: E402

settings.register_profile("rmqwire", deadline=None)
settings.load_profile("rmqwire")
