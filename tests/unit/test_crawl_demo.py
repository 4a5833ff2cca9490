"""A whole crawl of the demo site at engine level (crawl_platform.pipeline.batch, no Dagster): exactly the
expected pages land once, and max pages holds."""

from __future__ import annotations

import time

from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.bus.offsets import batch_key, plan_batches
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.batch import BatchCrawler
from tests.unit.crawl_rows import crawl_request, frontier_rows


def _run_crawl(settings, bus, store, request: CrawlRequest) -> BatchCrawler:
    fetcher = Fetcher(settings.user_agent, host_delay_s=0.0, allowed_networks=["127.0.0.0/8"])
    crawler = BatchCrawler(bus, store, fetcher, "lxml")
    crawler.frontier.register(request)
    cursor: dict[int, int] = {}
    for _tick in range(200):
        plan = plan_batches(bus.watermarks(bus.frontier_topic), cursor, settings.batch_size, max_batches=8)
        cursor = plan.cursor
        for offsets in plan.ranges:
            key = batch_key(0, offsets)
            report = crawler.fetch_and_land(key, offsets, refetch_done=False)
            assert report.dead_letters == 0
            crawler.expand(key)
        if not plan.ranges and crawler.frontier.status(request.crawl_id)[0].pending == 0:
            return crawler
    raise AssertionError("the crawl did not finish")


def test_crawl_of_the_demo_site_lands_exactly_the_expected_pages_once(settings, bus, store, site):
    _run_crawl(settings, bus, store, crawl_request("demo", site.base_url + "/", max_pages=10_000, max_depth=100))

    expected = DemoSite(120, seed=7).expected_urls(site.base_url)
    landed = [r[0] for r in store.query("SELECT url FROM pages")]
    assert sorted(landed) == sorted(expected)  # each exactly once, no more versions
    (status,) = Frontier(store, bus).status("demo")
    assert status.pending == 0
    assert status.disallowed >= 1  # the /private/ pages it found but never fetched
    # The server records a request just after answering it: let the last record arrive.
    deadline = time.monotonic() + 2.0
    while len(site.requests) < len(expected) + 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.02)
    assert all(site.request_count(p) == 0 for p in ("/private/0", "/private/1", "/private/2"))
    # Every page was requested once (/page/1 also once more through the /old-home redirect).
    for url in expected:
        path = url[len(site.base_url):]
        assert site.request_count(path) == (2 if path == "/page/1" else 1), path
    assert site.request_count("/robots.txt") == 1


def test_crawl_stops_at_max_pages(settings, bus, store, site):
    _run_crawl(settings, bus, store, crawl_request("small", site.base_url + "/", max_pages=10, max_depth=100))
    rows = frontier_rows(store, "small")
    assert len(rows) == 10
    assert {state for _, state in rows.values()} <= {"fetched", "failed", "disallowed"}
    landed = {r[0] for r in store.query("SELECT url FROM pages")}
    assert landed <= set(rows)
    assert len(site.requests) <= 10 + 1 + 1  # the admitted pages, robots.txt, a redirect hop
