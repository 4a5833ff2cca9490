"""Fixtures of the Dagster-layer tests: an ephemeral instance, the resources Definitions binds, and a
crawl's first batch materialised as a user's sensors would (registration, then the batch partition)."""

from collections.abc import Iterator

import pytest
from dagster import DagsterInstance, ExecuteInProcessResult, materialize

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.bus.offsets import OffsetRange, batch_key, plan_batches
from crawl_platform.config import Settings
from crawl_platform.pipeline.submission import submit_crawl
from crawl_platform_dagster.assets.checks import quality_checks
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.assets.intake import crawls
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


def topic_ranges(bus: KafkaBus, topic: str) -> list[OffsetRange]:
    """What the topic holds, as the sensors would cut it into batches."""
    return plan_batches(bus.watermarks(topic), {}, batch_size=1000, max_batches=100).ranges


def crawl_first_batch(instance: DagsterInstance, bus: KafkaBus, crawl_env: Settings,
                      request: CrawlRequest) -> tuple[str, ExecuteInProcessResult]:
    """Submit ``request``, register it through the ``crawls`` asset, then materialise its seeds'
    batch partition (the batch assets, ``frontier`` and the quality checks): the partition key and
    the batch's result."""
    submit_crawl(bus, request)
    seed_keys = [r.key for r in topic_ranges(bus, crawl_env.seeds_topic)]
    assert materialize([crawls], instance=instance, resources=RESOURCES,
                       run_config={"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}}).success
    key = batch_key(0, topic_ranges(bus, crawl_env.frontier_topic))
    instance.add_dynamic_partitions("frontier_batches", [key])
    return key, materialize([crawl_batch, frontier, *quality_checks], partition_key=key, instance=instance,
                            resources=RESOURCES)
