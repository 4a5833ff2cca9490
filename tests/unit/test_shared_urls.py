"""The same URL queued by two crawls in one batch: each crawl's User-Agent and scope decide its own
fetch (crawl_platform.pipeline.reader.BatchReader), and each crawl's frontier ends in its own state."""

from __future__ import annotations

from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform.urls import canonicalize
from tests.unit.conftest import loopback_fetcher
from tests.unit.crawl_rows import crawl_loop, frontier_rows


def test_two_crawls_queueing_one_url_in_one_batch_fetch_it_each_their_own_way(settings, bus, store, hostile):
    seed = canonicalize(hostile.url("/redirect?code=302&to=/page/1"))
    target = seed.removeprefix(hostile.url(""))
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request([seed], crawl_id="open", max_depth=0, user_agent="agent-open/1.0"))
    frontier.register(build_crawl_request([seed], crawl_id="strict", max_depth=0, user_agent="agent-strict/1.0",
                                          deny=[r"/page/"]))
    report = crawl_loop(settings, bus, store, loopback_fetcher()).run_until_idle()
    assert report.batches[0].messages == 2  # both crawls' messages came in one batch
    assert report.batches[0].deferred == 1  # the second crawl's fetch waited for the next batch
    hostile.settle()
    seen = [(s.path, s.headers["user-agent"]) for s in hostile.requests if s.path != "/robots.txt"]
    assert sorted(seen) == sorted([(target, "agent-open/1.0"), ("/page/1", "agent-open/1.0"),
                                   (target, "agent-strict/1.0")])
    assert frontier_rows(store, "open") == {seed: (0, "fetched")}
    assert frontier_rows(store, "strict") == {seed: (0, "failed")}  # its redirect left its scope
    pages = store.query("SELECT crawl_id, final_url, error FROM pages ORDER BY crawl_id")
    assert pages == [("open", hostile.url("/page/1"), None),
                     ("strict", hostile.url("/page/1"), f"redirect leaves the crawl's scope: {hostile.url('/page/1')}")]


def test_two_crawls_that_would_fetch_a_url_alike_share_one_fetch_and_each_get_their_row(settings, bus, store,
                                                                                     hostile):
    seed = hostile.url("/page/7")
    frontier = Frontier(store, bus)
    for crawl_id in ("first", "second"):
        frontier.register(build_crawl_request([seed], crawl_id=crawl_id, max_depth=0, user_agent="same/1.0"))
    report = crawl_loop(settings, bus, store, loopback_fetcher()).run_until_idle()
    assert (report.batches[0].messages, report.batches[0].deferred) == (2, 0)
    hostile.settle()
    assert hostile.request_count("/page/7") == 1
    assert frontier_rows(store, "first") == frontier_rows(store, "second") == {seed: (0, "fetched")}
    items = store.query("SELECT crawl_id, outcome FROM batch_items WHERE url = ? ORDER BY crawl_id", [seed])
    assert items == [("first", "fetched"), ("second", "fetched")]
