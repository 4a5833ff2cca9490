"""Dagster resource for reading the DuckDB crawl store (asset checks, schedules, sensors).

Opens the file briefly and read-only through :class:`crawl_platform.store.database.CrawlStore`, which
waits while a writer in another process holds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dagster import ConfigurableResource

from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.resources.settings import platform_settings

if TYPE_CHECKING:  # pandas loads only when a check reads a frame, not in every run process
    import duckdb
    import pandas as pd


class CrawlStoreResource(ConfigurableResource):  # type: ignore[type-arg]  # generic in the value it yields; a facade yields itself
    """Read access to the DuckDB store for checks and schedules (short, retried connections)."""

    lake_path: str | None = None

    def store(self) -> CrawlStore:
        settings = platform_settings(lake_path=self.lake_path) if self.lake_path else platform_settings()
        return CrawlStore.from_settings(settings)

    def read_frame(self, read: Callable[[duckdb.DuckDBPyConnection], pd.DataFrame]) -> pd.DataFrame:
        """What ``read`` (a reader of :mod:`crawl_platform.store`) gives on one snapshot of the lake."""
        with self.store().read() as con:
            return read(con)
