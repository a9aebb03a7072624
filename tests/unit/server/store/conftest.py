"""Fixtures of the store tests: stores in ``tmp_path`` with small segment files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import StoreFactory

from rmqwire.server.store import DefaultMessageStore


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[StoreFactory]:
    factory = StoreFactory(tmp_path / "store")
    yield factory
    factory.close_all()


@pytest.fixture
def store(store_factory: StoreFactory) -> DefaultMessageStore:
    return store_factory()
