"""rmqwire.tuning: the collector's settings change only when the application asks."""

from __future__ import annotations

import gc

import pytest
from twisted.internet.testing import MemoryReactorClock

from rmqwire.client.producer import Producer
from rmqwire.tuning import THROUGHPUT_GEN0, restore_gc, tune_gc


def test_tune_gc_sets_the_young_threshold_and_restore_puts_it_back() -> None:
    before = gc.get_threshold()
    settings = tune_gc()
    try:
        assert gc.get_threshold() == (THROUGHPUT_GEN0, before[1], before[2])
        assert settings.thresholds == before and not settings.froze
    finally:
        restore_gc(settings)
    assert gc.get_threshold() == before


def test_tune_gc_with_freeze_freezes_and_restore_unfreezes() -> None:
    before = gc.get_freeze_count()
    settings = tune_gc(5000, freeze=True)
    try:
        assert gc.get_threshold()[0] == 5000 and gc.get_freeze_count() > before
    finally:
        restore_gc(settings)
    assert gc.get_freeze_count() == 0


def test_tune_gc_refuses_a_threshold_below_one() -> None:
    with pytest.raises(ValueError):
        tune_gc(0)


def test_a_producer_leaves_the_collector_alone() -> None:
    before = gc.get_threshold()
    p = Producer(MemoryReactorClock(), "pg", namesrv_addr="127.0.0.1:9876")
    p.start()
    p.shutdown()
    assert gc.get_threshold() == before
