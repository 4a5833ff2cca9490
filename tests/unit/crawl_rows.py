"""Rows and pages the store and frontier tests build: crawl requests, fetch results, landed batches,
and what the tables and the frontier topic hold afterwards; and one batch fetched while a crawl
control command comes from another thread (:func:`fetch_batch_while_commanding`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from crawl_platform.bus.base import Bus
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import CrawlRequest, FrontierURL, decode_frontier_url
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import Fetcher, FetchResult
from crawl_platform.parse.html import parse_html
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.control import build_control
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.pipeline.loop import CrawlLoop
from crawl_platform.pipeline.planning import LoopPolicy, PlannedBatch
from crawl_platform.pipeline.reader import BatchReport, PreparedBatch
from crawl_platform.pipeline.shard import ShardResult
from crawl_platform.render.step import ShardRenderer
from crawl_platform.store.database import CrawlStore

TABLES = ("pages", "documents", "links", "batch_items")


def crawl_request(crawl_id: str, *seeds: str, max_pages: int = 100, max_depth: int = 5,
                  scope: str = "host") -> CrawlRequest:
    return CrawlRequest(crawl_id, seeds, max_pages, max_depth, scope, time.time())  # type: ignore[arg-type]


def table_counts(store: CrawlStore) -> dict[str, int]:
    return {t: store.query(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


def frontier_rows(store: CrawlStore, crawl_id: str) -> dict[str, tuple[int, str]]:
    rows = store.query("SELECT url, depth, state FROM frontier WHERE crawl_id = ?", [crawl_id])
    return {url: (depth, state) for url, depth, state in rows}


def topic_messages(bus: KafkaBus) -> list[FrontierURL]:
    out = []
    for part, (low, high) in bus.watermarks(bus.frontier_topic).items():
        if high > low:
            out += [decode_frontier_url(r.value)
                    for r in bus.read_range(bus.frontier_topic, OffsetRange(part, low, high))]
    return out


def fetch_result(url: str, body: bytes = b"", status: int | None = 200, *, error: str | None = None,
                 disallowed: bool = False, content_type: str = "text/html") -> FetchResult:
    return FetchResult(url, url, status, content_type if status else None, body, error,
                       datetime.now(UTC).replace(tzinfo=None), 1.0, disallowed)


def page_html(title: str, *hrefs: str) -> bytes:
    links = "".join(f'<a href="{h}">to {h}</a>' for h in hrefs)
    return f"<html><head><title>{title}</title></head><body><p>{title} text</p>{links}</body></html>".encode()


def land(store: CrawlStore, batch_id: str, items: list[FrontierURL], results: list[FetchResult]):
    by_url = {r.url: r for r in results}
    parsed = {r.url: parse_html(r.body, r.final_url, r.content_type) for r in results if r.is_html}
    return land_batch(store, batch_id, items, by_url, parsed)


def crawl_loop(settings: Settings, bus: Bus, store: CrawlStore, fetcher: Fetcher | None = None, *,
               batch_size: int = 0, groups: int = 0,
               before_batch: Callable[[PlannedBatch], None] | None = None,
               max_bytes: int | None = None, max_links: int | None = None,
               renderer: ShardRenderer | None = None) -> CrawlLoop:
    """The engine's crawl loop over the test's broker and store: loopback allowed, no politeness
    delay, ``batch_size`` messages per partition (the settings' by default), ``groups`` partition
    groups per batch (0: one partition a batch), ``max_bytes`` of bodies a batch (None: no limit)
    and ``max_links`` a page (None: the settings'); ``renderer`` renders the pages of crawls that
    render (None: they land as fetched)."""
    fetcher = fetcher or Fetcher(settings.user_agent, host_delay_s=0.0, allowed_networks=["127.0.0.0/8"])
    policy = LoopPolicy(batch_size or settings.batch_size, max_runs_per_tick=100, batch_groups=groups)
    crawler = BatchCrawler(bus, store, fetcher, "lxml", max_bytes=max_bytes,
                           max_links=max_links or settings.max_links_per_page, renderer=renderer)
    return CrawlLoop.with_policy(crawler, SeedIntake(bus, store, fetcher), policy, before_batch)


def crawl_site(settings: Settings, bus: Bus, store: CrawlStore, seed: str, crawl_id: str, max_depth: int = 3) -> None:
    """Crawl everything reachable from ``seed`` with the engine's crawl loop until nothing is pending."""
    loop = crawl_loop(settings, bus, store)
    loop.crawler.frontier.register(crawl_request(crawl_id, seed, max_depth=max_depth))
    loop.run_until_idle(max_turns=100)
    assert loop.crawler.frontier.status(crawl_id)[0].pending == 0


@dataclass(frozen=True)
class CommandedBatch:
    """One batch fetched while a control command came: what was planned, the fetch step's shard,
    the landing's report, and when the command committed (``time.monotonic()``)."""

    prepared: PreparedBatch
    shard: ShardResult
    report: BatchReport
    issued_at: float


def fetch_batch_while_commanding(crawler: BatchCrawler, bus: Bus, crawl_id: str, action: str,
                                 ready: Callable[[], bool], *, batch_id: str = "b1",
                                 timeout_s: float = 60.0) -> CommandedBatch:
    """Plan one batch of everything on the frontier topic, fetch it as one shard while another
    thread gives ``action`` (pause, cancel) on ``crawl_id`` as soon as ``ready()`` is true, then
    land and expand the batch. Fails when ``ready()`` stays false for ``timeout_s``."""
    ranges = [OffsetRange(p, lo, hi) for p, (lo, hi) in bus.watermarks(bus.frontier_topic).items() if hi > lo]
    prepared = crawler.prepare(batch_id, ranges, refetch_done=False)
    issued: list[float] = []

    def command_when_ready() -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)
        crawler.frontier.control(build_control(crawl_id, action))
        issued.append(time.monotonic())

    commander = threading.Thread(target=command_when_ready)
    commander.start()
    shard = crawler.fetch_shard(prepared.requests, prepared.hosts, batch_id)
    commander.join()
    assert issued, f"not ready to {action} crawl {crawl_id} within {timeout_s:g} s"
    report = crawler.land(prepared, [shard])
    crawler.expand(batch_id)
    return CommandedBatch(prepared, shard, report, issued[0])
