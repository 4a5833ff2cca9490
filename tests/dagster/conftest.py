"""Fixtures of the Dagster-layer tests: an ephemeral instance and the resources Definitions binds."""

import pytest
from dagster import DagsterInstance

from resources.crawl import CrawlSettingsResource
from resources.handoff import HANDOFF_IO_MANAGER_KEY, HandoffIOManager
from resources.store import CrawlStoreResource

RESOURCES = {"crawl": CrawlSettingsResource(), "crawl_store": CrawlStoreResource(),
             HANDOFF_IO_MANAGER_KEY: HandoffIOManager()}


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst
