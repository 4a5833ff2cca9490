"""One crawl batch end to end, without any orchestrator.

:class:`BatchCrawler` is what a Dagster run executes for a frontier partition: read its offset
ranges from the bus, decode (bad messages go to the dead-letter topic), fetch, parse, land, then
grow the frontier. It can be driven from a plain script or a test
(:mod:`crawl_platform.pipeline.loop`); the Dagster layer only adds scheduling, config and
metadata. Its neighbour :mod:`crawl_platform.pipeline.intake` does the same for the seeds topic.
The batch's reading (:class:`BatchReader`, :class:`PreparedBatch`, :class:`BatchReport`) is in
:mod:`crawl_platform.pipeline.reader`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crawl_platform.archive.writer import RecordPointer
from crawl_platform.bus.base import Bus
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import Fetcher, FetchRequest, FetchResult
from crawl_platform.frontier.frontier import Frontier, FrontierGrowth
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.malloc import release_free_memory
from crawl_platform.parse import MAX_LINKS_PER_PAGE
from crawl_platform.parse.html import DEFAULT_ENGINE, ParsedPage, ParserEngine
from crawl_platform.parse.pool import ParseWorkers
from crawl_platform.pipeline.landing import LandedBatch, StreamedPages, known_versions, land_batch
from crawl_platform.pipeline.page_events import EventsPublished, PageEventPublisher
from crawl_platform.pipeline.reader import BatchReader, BatchReport, PreparedBatch
from crawl_platform.pipeline.shard import ShardFetcher, ShardResult
from crawl_platform.pipeline.streaming import StreamingLanding
from crawl_platform.render.results import PageRendering, ShardRendering
from crawl_platform.render.step import ShardRenderer
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.hosts import HostRecord
from crawl_platform.store.revisits import DEFAULT_REVISITS, RevisitPolicy


class HandoffLostError(RuntimeError):
    """A retried landing step found its inputs gone and the batch never landed; ``str(err)``
    tells the operator to materialise the partition again."""


@dataclass(frozen=True)
class LandingOutcome:
    """What a landing step did: landed the batch (``report``), found it had already landed (a
    retry of a run killed after the commit), or had nothing to land (``lost``: the broker lost
    the batch, whose URLs are published again from the store)."""

    report: BatchReport | None
    already_landed: bool = False
    lost: str = ""


class BatchLander:
    """Lands a batch in one store transaction: the only step of a batch that writes pages."""

    def __init__(self, store: CrawlStore, batch_landed: Callable[[str], bool],
                 revisit: RevisitPolicy = DEFAULT_REVISITS) -> None:
        self.store = store
        self.batch_landed = batch_landed
        self.revisit = revisit

    def land(self, prepared: PreparedBatch, shards: list[ShardResult]) -> BatchReport:
        report = prepared.report
        results: dict[str, FetchResult] = {}
        parsed: dict[str, ParsedPage] = {}
        hosts: list[HostRecord] = []
        archived: dict[str, RecordPointer] = {}
        unchanged: set[str] = set()
        postponed: set[str] = set()
        held: set[str] = set()
        rendering: dict[str, PageRendering] = {}
        streamed = StreamedPages()
        for shard in shards:
            streamed.add(shard.streamed)
            rendering.update(shard.rendering)
            postponed.update(shard.postponed)
            held.update(shard.held)
            unchanged.update(shard.unchanged)
            archived.update(shard.archived)
            results.update(shard.results)
            parsed.update(shard.parsed)
            hosts.extend(shard.hosts)
            for phase, seconds in shard.seconds.items():
                report.seconds[phase] = report.seconds.get(phase, 0.0) + seconds
        clock = time.perf_counter()
        landed = land_batch(self.store, prepared.batch_id, prepared.items, results, parsed, hosts, archived,
                            self.revisit, unchanged, postponed, rendering, streamed, known_versions(prepared.requests))
        if landed.refetch:  # not landed: left for a later batch, as postponed URLs are
            results = {url: r for url, r in results.items() if url not in landed.refetch}
            postponed |= landed.refetch
        report.postponed = len(postponed)
        report.streamed = len(streamed.urls)
        # Passed over by a fetch or render step once their crawls were paused or cancelled: they land
        # ``skipped``, as those the plan step held (``report.held`` already counts those).
        report.held += sum(1 for i in prepared.items if i.url in held)
        report.rendered = sum(1 for r in rendering.values() if r.rendered)
        report.unchanged += len(unchanged) - len(landed.refetch)
        report.seconds["land"] = time.perf_counter() - clock
        _count(report, prepared.items, results, landed, postponed)
        report.bytes += streamed.bytes  # their results here carry no body
        return report

    def land_or_resume(self, batch_id: str, prepared: PreparedBatch | None,
                       shards: Sequence[ShardResult | None],
                       renderings: Sequence[ShardRendering | None] = ()) -> LandingOutcome:
        """Land the batch, unless this is a retry whose inputs are gone (``None``): the handoff is
        removed only after the batch landed, so then the batch landed already if its items are
        recorded; if they are not, raises :class:`HandoffLostError`. A lost batch lands nothing.
        ``renderings`` are the render steps' (None: a shard with nothing to render), applied to the
        shards before landing: they are keyed by URL and origin, so their order does not matter."""
        if prepared is None or any(shard is None for shard in shards):
            if not self.batch_landed(batch_id):
                raise HandoffLostError(f"the handoff of batch {batch_id} is gone and it never landed: "
                                       "materialise the partition again to fetch it")
            return LandingOutcome(None, already_landed=True)
        if prepared.lost:
            return LandingOutcome(None, lost=prepared.lost)
        landed = [s for s in shards if s is not None]
        for rendered in renderings:
            # To the shard its pages came from: a shard holds whole hosts, and so their hosts rows.
            if rendered is None:
                continue
            at = next((i for i, shard in enumerate(landed) if rendered.rendering.keys() & shard.results.keys()), None)
            if at is not None:
                landed[at] = landed[at].with_rendering(rendered)
        return LandingOutcome(self.land(prepared, landed))


class UnconfirmedURLsError(RuntimeError):
    """The broker did not confirm some newly admitted URLs. They stay ``discovered`` in the store;
    the step fails so that its retry publishes them again."""


def expand_batch(frontier: Frontier, batch_id: str,
                 events: PageEventPublisher | None = None) -> FrontierGrowth:
    """Publish a landed batch's page events (with ``events``), grow the frontier from its links,
    and re-publish URLs the broker dropped. Raises :class:`UnconfirmedURLsError` when the broker
    did not confirm every new URL or event; the retry publishes them again (and the loop, once
    idle, the events of batches whose retries all failed). The batch's own memory is free then,
    and goes back to the system."""
    try:
        published = events.publish_batch(batch_id) if events is not None else EventsPublished()
        growth = frontier.expand(batch_id)
        frontier.republish_stale()
    finally:
        release_free_memory()
    if growth.unconfirmed:
        raise UnconfirmedURLsError(f"the broker did not confirm {growth.unconfirmed} of {growth.admitted} new URLs")
    if published.unconfirmed:
        raise UnconfirmedURLsError(f"the broker did not confirm {published.unconfirmed} page events")
    return growth


class BatchCrawler:
    """A whole batch in one process: :class:`BatchReader`, :class:`ShardFetcher` and
    :class:`BatchLander` in a row, then :func:`expand_batch`. A Dagster run executes the same
    parts as separate steps (the fetch shards in parallel on a distributed executor)."""

    def __init__(self, bus: Bus, store: CrawlStore, fetcher: Fetcher, parser: ParserEngine = DEFAULT_ENGINE,
                 page_events: bool = True, archive: bool = True,
                 revisit: RevisitPolicy = DEFAULT_REVISITS, *, main_content: bool = True,
                 parse_workers: int = 0, workers: ParseWorkers | None = None, workers_from: int = 0,
                 max_links: int = MAX_LINKS_PER_PAGE, max_bytes: int | None = None,
                 renderer: ShardRenderer | None = None, land_every_s: float = 0.0) -> None:
        self.bus = bus
        self.store = store
        self.fetcher = fetcher
        self.frontier = Frontier(store, bus)
        self.events = PageEventPublisher(store, bus) if page_events else None
        read_model = FrontierReadModel(store)
        self.reader = BatchReader(bus, store, read_model)
        self.shard_fetcher = ShardFetcher(fetcher, parser, store.archive if archive else None,
                                          main_content=main_content, parse_workers=parse_workers,
                                          workers=workers, workers_from=workers_from, max_links=max_links,
                                          max_bytes=max_bytes, crawl_states=read_model.crawl_states,
                                          streaming=StreamingLanding.of(store, land_every_s, archive))
        self.lander = BatchLander(store, read_model.batch_landed, revisit)
        # Renders the pages of crawls that render (none: such pages land as fetched over HTTP); it
        # watches its crawls' states in this store, as the shard fetcher does, unless told otherwise.
        self.renderer = renderer
        if renderer is not None and renderer.crawl_states is None:
            renderer.crawl_states = read_model.crawl_states

    @classmethod
    def from_settings(cls, settings: Settings, workers: ParseWorkers | None = None) -> BatchCrawler:
        """The crawler the settings describe; ``workers``: parse workers lent by their owner."""
        store = CrawlStore.from_settings(settings)
        return cls(KafkaBus.from_settings(settings), store,
                   Fetcher.from_settings(settings), settings.parser, settings.page_events,
                   settings.archive_responses, RevisitPolicy.from_settings(settings),
                   main_content=settings.main_content, parse_workers=settings.parse_workers, workers=workers,
                   workers_from=settings.parse_workers_from, max_links=settings.max_links_per_page,
                   max_bytes=settings.batch_max_bytes,
                   renderer=ShardRenderer.from_settings(
                       settings, store.archive if settings.archive_responses else None),
                   land_every_s=settings.land_every_s)

    def fetch_and_land(self, batch_id: str, offsets: OffsetRange | list[OffsetRange],
                       refetch_done: bool = True) -> BatchReport:
        """Read, fetch and land the batch (see :meth:`BatchReader.prepare` for ``refetch_done``)."""
        prepared = self.prepare(batch_id, offsets, refetch_done)
        if prepared.lost:
            return prepared.report
        return self.land(prepared, [self.fetch_shard(prepared.requests, prepared.hosts, batch_id)])

    def prepare(self, batch_id: str, offsets: OffsetRange | list[OffsetRange],
                refetch_done: bool = True) -> PreparedBatch:
        return self.reader.prepare(batch_id, offsets, refetch_done)

    def fetch_shard(self, requests: list[FetchRequest], hosts: list[HostRecord], batch_id: str = "") -> ShardResult:
        """Fetch the shard, then render its pages that need it (the two steps a Dagster run keeps apart)."""
        shard = self.shard_fetcher.fetch(requests, hosts, batch_id)
        return self.renderer.render(shard, batch_id) if self.renderer is not None else shard

    def land(self, prepared: PreparedBatch, shards: list[ShardResult]) -> BatchReport:
        return self.lander.land(prepared, shards)

    def expand(self, batch_id: str) -> FrontierGrowth:
        return expand_batch(self.frontier, batch_id, self.events)

    def close(self) -> None:
        """Ends the shard fetcher's parse workers and its connections, and the renderer's browsers."""
        self.shard_fetcher.close()
        if self.renderer is not None:
            self.renderer.close()


def _count(report: BatchReport, items: list[FrontierURL], results: dict[str, FetchResult],
           landed: LandedBatch, postponed: set[str]) -> None:
    report.skipped = sum(1 for i in items if i.url not in results and i.url not in postponed)
    for r in results.values():
        report.bytes += len(r.body)
        if r.disallowed:
            report.disallowed += 1
        elif r.not_modified:
            report.not_modified += 1
            report.fetched += 1
        elif r.status is None or r.status >= 400:
            report.failed += 1
        else:
            report.fetched += 1
    report.new_versions = landed.new_versions
    report.links = landed.links
    report.snapshot_id = landed.snapshot_id
