"""Dagster resources: thin facades that build engine objects from the platform settings.

Settings are read from the environment when a run (or sensor tick) initialises the resource,
never at import time; a field set on the resource overrides the environment for that field.
Neighbours: assets/ and sensors/ receive these; crawl_platform/ does the work.
"""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.batch import BatchCrawler, BatchLander, BatchReader
from crawl_platform.pipeline.continuation import Continuation
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.page_events import PageEventPublisher
from crawl_platform.pipeline.shard import ShardFetcher
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.revisits import RevisitPolicy


class CrawlSettingsResource(ConfigurableResource):  # type: ignore[type-arg]  # generic in the value it yields; a facade yields itself
    """The platform settings (env vars documented in the README); fields here override them."""

    lake_path: str | None = None
    kafka_bootstrap_servers: str | None = None

    def settings(self) -> Settings:
        overrides: dict[str, Any] = {}
        if self.lake_path:
            overrides["lake_path"] = self.lake_path
        if self.kafka_bootstrap_servers:
            overrides["kafka_bootstrap_servers"] = self.kafka_bootstrap_servers
        return Settings(**overrides)

    def bus(self) -> KafkaBus:
        return KafkaBus.from_settings(self.settings())

    def store(self) -> CrawlStore:
        return CrawlStore.from_settings(self.settings())

    def frontier(self) -> Frontier:
        return Frontier(self.store(), self.bus())

    def page_events(self, frontier: Frontier) -> PageEventPublisher | None:
        """The page-event publisher on ``frontier``'s store and bus, or None when CRAWL_PAGE_EVENTS is off."""
        return PageEventPublisher(frontier.store, frontier.bus) if self.settings().page_events else None

    def batch_reader(self) -> BatchReader:
        settings = self.settings()
        store = CrawlStore.from_settings(settings)
        return BatchReader(KafkaBus.from_settings(settings), store, FrontierReadModel(store))

    def shard_fetcher(self) -> ShardFetcher:
        settings = self.settings()
        archive = CrawlStore.from_settings(settings).archive_root if settings.archive_responses else None
        return ShardFetcher(Fetcher.from_settings(settings), settings.parser, archive,
                            main_content=settings.main_content, parse_workers=settings.parse_workers)

    def batch_lander(self) -> BatchLander:
        store = self.store()
        return BatchLander(store, FrontierReadModel(store).batch_landed, RevisitPolicy.from_settings(self.settings()))

    def batch_crawler(self) -> BatchCrawler:
        return BatchCrawler.from_settings(self.settings())

    def continuation(self) -> Continuation:
        return Continuation.from_settings(self.settings())

    def seed_intake(self) -> SeedIntake:
        return SeedIntake.from_settings(self.settings())
