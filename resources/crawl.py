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
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.store.database import CrawlStore


class CrawlSettingsResource(ConfigurableResource):  # type: ignore[type-arg]  # generic in the value it yields; a facade yields itself
    """The platform settings (env vars documented in the README); fields here override them."""

    duckdb_path: str | None = None
    kafka_bootstrap_servers: str | None = None

    def settings(self) -> Settings:
        overrides: dict[str, Any] = {}
        if self.duckdb_path:
            overrides["duckdb_path"] = self.duckdb_path
        if self.kafka_bootstrap_servers:
            overrides["kafka_bootstrap_servers"] = self.kafka_bootstrap_servers
        return Settings(**overrides)

    def bus(self) -> KafkaBus:
        return KafkaBus.from_settings(self.settings())

    def store(self) -> CrawlStore:
        return CrawlStore.from_settings(self.settings())

    def batch_crawler(self) -> BatchCrawler:
        return BatchCrawler.from_settings(self.settings())

    def seed_intake(self) -> SeedIntake:
        return SeedIntake.from_settings(self.settings())
