"""Whole batches against the hostile site (crawl_platform.pipeline.batch.BatchCrawler on the real broker and
DuckDB): conditional requests on a recrawl, each crawl's User-Agent and scope, the hosts table,
and trap URLs that must not run away."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from crawl_platform.bus.messages import CrawlRequest, FrontierURL
from crawl_platform.fetch.fetcher import Fetcher, FetchResult
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.parse.html import parse_html
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.pipeline.reader import BatchReport
from tests.sites.hostile import Reply, html_page
from tests.unit.crawl_rows import crawl_loop


class _Crawl:
    """Crawls with the engine's loop (as the sensors and runs do) until nothing is left to do."""

    def __init__(self, settings, bus, store) -> None:
        self.fetcher = Fetcher(settings.user_agent, host_delay_s=0.0, allowed_networks=["127.0.0.1/32"])
        self.loop = crawl_loop(settings, bus, store, self.fetcher)

    def run(self, crawl_id: str, *seeds: str, max_depth: int = 0, **options) -> list[BatchReport]:
        request = CrawlRequest(crawl_id, seeds, 1000, max_depth, "host", time.time(), **options)
        self.loop.crawler.frontier.register(request)
        reports = self.loop.run_until_idle(max_turns=100).batches
        assert self.loop.crawler.frontier.status(crawl_id)[0].pending == 0, f"crawl {crawl_id} did not finish"
        return reports


@pytest.fixture
def crawl(settings, bus, store) -> _Crawl:
    return _Crawl(settings, bus, store)


def test_a_recrawl_asks_conditionally_and_a_304_adds_no_version(crawl, store, hostile):
    url = hostile.url("/etag")
    crawl.run("first", url)
    assert store.query("SELECT version, status, etag FROM pages") == [(1, 200, '"v1"')]

    reports = crawl.run("second", url)
    hostile.settle()
    last = hostile.seen("/etag")[-1]
    assert last.headers["if-none-match"] == '"v1"'
    assert last.headers["if-modified-since"].endswith(" GMT")
    assert last.status == 304
    assert sum(r.not_modified for r in reports) == 1
    assert store.query("SELECT version, crawl_id FROM pages") == [(1, "first")]  # no new version
    assert store.query("SELECT state FROM frontier WHERE crawl_id = 'second'") == [("fetched",)]  # not an error

    hostile.etag_version = 2  # the page changes: a full answer, version 2
    crawl.run("third", url)
    assert store.query("SELECT version, status, etag FROM pages ORDER BY version") == [
        (1, 200, '"v1"'), (2, 200, '"v2"')]


def test_each_crawl_fetches_with_its_own_user_agent_and_robots_group(crawl, store, hostile):
    hostile.robots = Reply(200, b"User-agent: specialbot\nDisallow: /page/2\n\nUser-agent: *\nDisallow: /page/3\n")
    pages = [hostile.url(f"/page/{k}") for k in (1, 2, 3)]
    crawl.run("special", *pages, user_agent="SpecialBot/3.0 (+https://bots.example/special)")
    hostile.settle()
    assert {s.path for s in hostile.requests} == {"/robots.txt", "/page/1", "/page/3"}
    assert {s.headers["user-agent"] for s in hostile.requests if s.path != "/robots.txt"} == {
        "SpecialBot/3.0 (+https://bots.example/special)"}
    states = dict(store.query("SELECT url, state FROM frontier WHERE crawl_id = 'special'"))
    assert states == {pages[0]: "fetched", pages[1]: "disallowed", pages[2]: "fetched"}


def test_redirect_hops_are_checked_against_the_crawls_own_patterns(crawl, store, hostile):
    seed = hostile.url("/redirect?to=%2Fpage%2F7")
    crawl.run("picky", seed, deny_patterns=(r"/page/7$",))
    assert store.query("SELECT status, error FROM pages WHERE url = ?", [seed]) == [
        (None, f"redirect leaves the crawl's scope: {hostile.url('/page/7')}")]
    hostile.settle()
    assert hostile.request_count("/page/7") == 0


def test_the_batch_writes_what_it_learned_about_its_hosts(crawl, store, hostile):
    hostile.robots = Reply(200, b"User-agent: *\nDisallow: /private\n")
    crawl.run("learn", hostile.url("/page/1"))
    assert store.query("SELECT origin, robots_status, robots_body, delay_ms FROM hosts") == [
        (origin_of(hostile.base_url), 200, "User-agent: *\nDisallow: /private\n", 0)]


def test_an_endless_calendar_stops_at_the_depth_limit(crawl, store, hostile):
    crawl.run("calendar", hostile.url("/cal/2026/11"), max_depth=5)
    landed = sorted(r[0] for r in store.query("SELECT url FROM pages"))
    months = ["2026/11", "2026/12", "2027/1", "2027/2", "2027/3", "2027/4"]
    assert landed == sorted(hostile.url(f"/cal/{m}") for m in months)


def test_a_path_that_repeats_itself_is_cut_off(crawl, store, hostile):
    crawl.run("repeats", hostile.url("/loop-path/x/"), max_depth=50)
    landed = sorted(r[0] for r in store.query("SELECT url FROM pages"))
    assert landed == [hostile.url("/loop-path/x/"), hostile.url("/loop-path/x/x/")]


def test_a_recrawl_does_not_parse_a_body_the_lake_has_and_still_follows_its_links(crawl, store, hostile):
    # /page/<n> sends no validators: the recrawl gets full answers, the bodies the lake has.
    crawl.run("first", hostile.url("/page/1"), max_depth=1)
    reports = crawl.run("second", hostile.url("/page/1"), max_depth=1)
    assert sum(r.unchanged for r in reports) == 2  # neither page parsed again
    assert sum(r.new_versions for r in reports) == 0
    # /page/2 was reached from the links of /page/1's stored version.
    assert sorted(store.query("SELECT url, state FROM frontier WHERE crawl_id = 'second'")) == [
        (hostile.url("/page/1"), "fetched"), (hostile.url("/page/2"), "fetched")]
    assert store.query("SELECT count(*) FROM documents") == [(2,)]


def test_an_unchanged_page_another_batch_landed_meanwhile_is_fetched_again_and_parsed(crawl, store, hostile):
    url = hostile.url("/page/1")
    crawl.run("first", url)
    other = FetchResult(url, url, 200, "text/html", html_page("Other"), None, datetime.now(UTC).replace(tzinfo=None),
                        1.0)
    shards = crawl.loop.crawler.shard_fetcher
    fetch = shards.fetch

    def landed_meanwhile(*args, **kwargs):
        # After the batch read the latest version's hash, another batch lands a different body.
        shards.fetch = fetch
        land_batch(store, "other", [FrontierURL("other", url, 0)], {url: other}, {url: parse_html(other.body, url)})
        return fetch(*args, **kwargs)

    shards.fetch = landed_meanwhile
    reports = crawl.run("second", url)
    # The first batch fetched the body the batch read as latest (unchanged, not parsed): landing it
    # would make a version without its document, so it was left for a later batch, which parsed it.
    assert [(r.postponed, r.unchanged, r.new_versions) for r in reports] == [(1, 0, 0), (0, 0, 1)]
    assert hostile.request_count("/page/1") == 3
    assert store.query("SELECT version, crawl_id, title FROM pages JOIN documents USING (url, version) "
                       "ORDER BY version") == [(1, "first", "Page 1"), (2, "other", "Other"), (3, "second", "Page 1")]
    assert store.query("SELECT state FROM frontier WHERE crawl_id = 'second'") == [("fetched",)]
