"""Dagster resources: thin facades that build engine objects from the platform settings.

Settings are read from the environment when a run (or sensor tick) first asks for them, never at
import time (built once per environment, :mod:`.settings`); a field set on the resource overrides
the environment for that field.
Neighbours: assets/ and sensors/ receive these; crawl_platform/ does the work.
"""

from __future__ import annotations

import multiprocessing.util
import os
from typing import Any

from dagster import ConfigurableResource

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.parse.pool import ParseWorkers
from crawl_platform.pipeline.batch import BatchCrawler, BatchLander
from crawl_platform.pipeline.continuation import Continuation
from crawl_platform.pipeline.coordinator import CrawlCoordinator
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.page_events import PageEventPublisher
from crawl_platform.pipeline.reader import BatchReader
from crawl_platform.pipeline.shard import ShardFetcher
from crawl_platform.pipeline.streaming import StreamingLanding
from crawl_platform.render.step import ShardRenderer
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.revisits import RevisitPolicy
from crawl_platform_dagster.resources.settings import platform_settings


class CrawlSettingsResource(ConfigurableResource):  # type: ignore[type-arg]  # generic in the value it yields; a facade yields itself
    """The platform settings (env vars documented in docs/settings.md); fields here override them."""

    lake_path: str | None = None
    kafka_bootstrap_servers: str | None = None

    def settings(self) -> Settings:
        overrides: dict[str, Any] = {}
        if self.lake_path:
            overrides["lake_path"] = self.lake_path
        if self.kafka_bootstrap_servers:
            overrides["kafka_bootstrap_servers"] = self.kafka_bootstrap_servers
        return platform_settings(**overrides)

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

    def shard_fetcher(self, *, pages: int, shared_workers: bool = False) -> ShardFetcher:
        """A fetcher for one shard of ``pages`` URLs; ``shared_workers``: parse with the process's
        parse workers (:func:`run_parse_workers`) rather than its own, started and ended with it.
        A shard smaller than ``CRAWL_PARSE_WORKERS_FROM`` starts no workers: it is parsed in the
        step unless they run already."""
        settings = self.settings()
        store = CrawlStore.from_settings(settings)
        lent = run_parse_workers(settings, start=pages >= settings.parse_workers_from) if shared_workers else None
        return ShardFetcher(Fetcher.from_settings(settings), settings.parser,
                            store.archive if settings.archive_responses else None,
                            main_content=settings.main_content, parse_workers=settings.parse_workers,
                            workers=lent, workers_from=settings.parse_workers_from,
                            max_links=settings.max_links_per_page, max_bytes=settings.batch_max_bytes,
                            crawl_states=FrontierReadModel(store).crawl_states,
                            streaming=StreamingLanding.of(store, settings.land_every_s, settings.archive_responses))

    def shard_renderer(self) -> ShardRenderer:
        """The render step's renderer: starts browsers only for a shard with pages to render."""
        settings = self.settings()
        store = CrawlStore.from_settings(settings)
        return ShardRenderer.from_settings(settings, store.archive if settings.archive_responses else None,
                                           FrontierReadModel(store).crawl_states)

    def start_parse_workers(self, pages: int) -> None:
        """Start the run's parse workers now, for a batch of ``pages`` (they take a while to import
        and warm the parser), so that the first fetch step's pages do not wait for them;
        not for a batch smaller than ``CRAWL_PARSE_WORKERS_FROM``, which its fetch step parses
        itself (on a broad crawl the first runs' workers would compete for the cores with the
        runs' own first batches, and delay the first rows)."""
        settings = self.settings()
        if pages >= settings.parse_workers_from:
            run_parse_workers(settings)

    def batch_lander(self) -> BatchLander:
        store = self.store()
        return BatchLander(store, FrontierReadModel(store).batch_landed, RevisitPolicy.from_settings(self.settings()))

    def batch_crawler(self) -> BatchCrawler:
        return BatchCrawler.from_settings(self.settings())

    def coordinator(self) -> CrawlCoordinator:
        """The engine's crawl coordinator, which the Kafka sensors ask what to run next."""
        return CrawlCoordinator.from_settings(self.settings())

    def continuation(self, shared_workers: bool = False) -> Continuation:
        settings = self.settings()
        return Continuation.from_settings(settings, run_parse_workers(settings) if shared_workers else None)

    def seed_intake(self) -> SeedIntake:
        return SeedIntake.from_settings(self.settings())


_RUN_PARSE_WORKERS: dict[int, ParseWorkers] = {}  # by process id: a fork starts its own


def run_parse_workers(settings: Settings, start: bool = True) -> ParseWorkers | None:
    """The parse workers that every step of this process shares, started at the first call
    (``start`` False: only those started already, else None): with the in-process executor a
    run's steps (plan, fetch, land, then the next batches its frontier step goes on to) run in the run's
    process, so they start once per run rather than once per step, and no step waits for their
    start again. They end with the process. None with
    ``CRAWL_PARSE_WORKERS=0``. Only steps that share their run's process ask for them: a Celery
    worker process outlives the steps it runs, and each of those starts and ends its own."""
    if settings.parse_workers <= 0:
        return None
    pid = os.getpid()
    workers = _RUN_PARSE_WORKERS.get(pid)
    if workers is None and start:
        _RUN_PARSE_WORKERS.clear()  # another process's, inherited by a fork
        workers = _RUN_PARSE_WORKERS[pid] = ParseWorkers(settings.parse_workers)
        # Killed before the process waits for its children. A forked run is a multiprocessing
        # child: when it returns, multiprocessing joins its child processes before Python's own
        # exit hooks would shut the workers' pool down, so without this the run's process would
        # wait for its idle workers for ever (in ``_exit_function``'s ``join``), and keep its
        # memory beside the next runs until the stack stopped.
        multiprocessing.util.Finalize(None, workers.kill, exitpriority=10)
    return workers
