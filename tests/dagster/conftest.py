"""Fixtures of the Dagster-layer tests: an ephemeral instance and the resources Definitions binds."""

from collections.abc import Iterator

import pytest
from dagster import DagsterInstance

from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.resources.handoff import HANDOFF_IO_MANAGER_KEY, HandoffIOManager
from crawl_platform_dagster.resources.store import CrawlStoreResource

RESOURCES = {"crawl": CrawlSettingsResource(), "crawl_store": CrawlStoreResource(),
             HANDOFF_IO_MANAGER_KEY: HandoffIOManager()}


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    """An in-memory instance of the test's own: its runs, events and dynamic partitions vanish with it."""
    with DagsterInstance.ephemeral() as inst:
        yield inst
