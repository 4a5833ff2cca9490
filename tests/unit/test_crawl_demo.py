"""A whole crawl of the demo site with the engine's crawl loop (crawl_platform.pipeline.loop, no
Dagster): exactly the expected pages land once, and max pages holds."""

from __future__ import annotations

import time

from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.frontier.frontier import Frontier
from tests.unit.crawl_rows import crawl_loop, crawl_request, frontier_rows


def _run_crawl(settings, bus, store, request: CrawlRequest) -> None:
    loop = crawl_loop(settings, bus, store)
    loop.crawler.frontier.register(request)
    report = loop.run_until_idle(max_turns=200)
    assert report.batches
    assert all(r.dead_letters == 0 for r in report.batches)
    assert loop.crawler.frontier.status(request.crawl_id)[0].pending == 0


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
