"""Fixtures of the lake command tests: the test's settings exported as the command line reads
them, and a frontier on an in-memory bus (over the Kafka one of the tests above this folder)."""

from __future__ import annotations

import pytest

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.config import Settings
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.store.database import CrawlStore
from tests.conftest import export_settings


@pytest.fixture
def lake_env(store_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The test's settings exported, as the command line reads them."""
    return export_settings(store_settings, monkeypatch)


@pytest.fixture
def frontier(store: CrawlStore) -> Frontier:
    bus = InMemoryBus()
    bus.ensure_topics()
    return Frontier(store, bus)
