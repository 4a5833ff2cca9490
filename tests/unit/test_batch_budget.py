"""A batch's bodies in memory are bounded (CRAWL_BATCH_MAX_BYTES): the fetch starts no request once
they reach the budget, the URLs it did not reach land as ``postponed`` items and are published
again, and a later batch fetches them: every page lands, each fetched once."""

from __future__ import annotations

from urllib.parse import urlsplit

from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.pipeline.shard import ShardFetcher
from tests.unit.conftest import loopback_fetcher
from tests.unit.crawl_rows import crawl_loop, crawl_request


def test_the_default_budget_is_256_mib():
    assert Settings().batch_max_bytes == 256 * 1024 * 1024


def test_a_shard_starts_no_request_once_its_bodies_reach_the_budget(hostile):
    pages = [hostile.url(f"/page/{n}") for n in range(20)]
    one = len(loopback_fetcher().fetch(pages[0]).body)
    shard = ShardFetcher(loopback_fetcher(concurrency=1), "lxml", None, max_bytes=3 * one - 1)
    result = shard.fetch([FetchRequest(url) for url in pages], [])
    assert sorted(result.results) == sorted(pages[:3])  # the third reached the budget
    assert result.postponed == sorted(pages[3:], key=pages.index)
    hostile.settle()
    assert [hostile.request_count(f"/page/{n}") for n in range(20)] == [2] + [1] * 2 + [0] * 17


def test_urls_over_a_batchs_budget_are_fetched_by_later_batches_and_every_page_lands_once(crawl_env, bus, store):
    with DemoSite(n_pages=60, seed=5).serve() as server:
        expected = server.site.expected_urls(server.base_url)
        largest = max(len(server.site.body(path)) for path in server.site.paths())
        loop = crawl_loop(crawl_env, bus, store, batch_size=1000, max_bytes=4 * largest)
        loop.crawler.frontier.register(crawl_request("budget", server.base_url + "/", max_depth=20))
        batches = loop.run_until_idle(max_turns=200).batches
        assert sum(report.postponed for report in batches) > 0
        # The budget, and at most what the 16 fetch threads had in flight when it was reached.
        assert all(report.bytes <= 4 * largest + 16 * largest for report in batches)
        fetched_twice = {u for u in expected if server.request_count(urlsplit(u).path) > 1}
    urls = [r[0] for r in store.query("SELECT url FROM pages WHERE crawl_id = 'budget'")]
    assert sorted(urls) == sorted(expected)
    redirect_targets = {r[0] for r in store.query("SELECT final_url FROM pages WHERE final_url <> url")}
    assert fetched_twice <= redirect_targets  # a redirect's target is also requested on its own
    assert store.query("SELECT count(*) FROM batch_items WHERE outcome = 'postponed'")[0][0] == sum(
        report.postponed for report in batches)
    assert store.query("SELECT state, count(*) FROM frontier WHERE crawl_id = 'budget' AND state IN "
                       "('discovered', 'queued') GROUP BY state") == []
