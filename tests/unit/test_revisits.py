"""Adaptive revisits (crawl_platform.store.revisits) through recurring passes of the engine's loop,
on a loopback site whose pages change at different rates; time is injected, never slept."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.pipeline.schedules import plan_due_passes
from crawl_platform.pipeline.submission import build_crawl_request
from tests.sites.changing import ChangingSite
from tests.unit.crawl_rows import crawl_loop, fetch_result, frontier_rows, land, page_html

PAGES = ("/", "/news", "/about", "/static")


@pytest.fixture
def changing():
    with ChangingSite() as site:
        yield site


def test_often_changing_pages_are_fetched_more_often_than_stable_ones(settings, store, changing):
    bus = InMemoryBus(settings.seeds_topic, settings.frontier_topic, settings.dead_letter_topic, partitions=2)
    bus.ensure_topics()
    loop = crawl_loop(settings, bus, store)
    # Time is injected: the first pass was submitted 9 hours ago, so the eight passes after it are
    # not dated ahead of the clock (a submission time ahead of it is refused).
    first = build_crawl_request([changing.base_url + "/"], crawl_id="site", every="1h", max_depth=3)
    loop.crawler.frontier.register(replace(first, submitted_at=first.submitted_at - 9 * 3600))
    loop.run_until_idle()
    [(t0,)] = store.query("SELECT submitted_at FROM crawls WHERE crawl_id = 'site'")
    per_pass, about = [], []
    for k in range(1, 9):
        changing.next_pass()
        changing.clear_requests()
        now = t0 + timedelta(hours=k, minutes=1)
        plan = plan_due_passes(store, now)
        assert [p.crawl_id for p in plan.passes] == [f"site@{now:%Y%m%dT%H%M}"]
        assert plan.passes[0].max_depth == 3
        loop.crawler.frontier.register(plan.passes[0])
        loop.run_until_idle()
        assert plan_due_passes(store, now).passes == []  # the pass just ran: nothing due until the next hour
        per_pass.append(Counter(r.path for r in changing.requests if r.path != "/robots.txt"))
        about += [r for r in changing.requests if r.path == "/about"]

    # /news changed every pass and was fetched by every one; the stable pages grow their interval
    # 1h -> 1.4h -> 1.96h -> 2.74h and were fetched at passes 1, 3, 5 and 8 only.
    assert [c["/news"] for c in per_pass] == [1] * 8
    for stable in ("/", "/about", "/static"):
        assert [k for k, c in enumerate(per_pass, 1) if c[stable]] == [1, 3, 5, 8], stable
    # A pass is not a walk of the site: pass 2 fetched the changing page, the article it linked to
    # last pass (due after 1h), and its new link.
    assert set(per_pass[1]) == {"/news", "/article-1", "/article-2"}
    # The unchanged /about was asked conditionally and answered 304 each time after the first.
    assert len(about) == 4
    assert all(r.headers.get("if-none-match") == '"about-1"' and r.status == 304 for r in about)

    rows = {url.removeprefix(changing.base_url): (interval, changes) for url, interval, changes in store.query(
        "SELECT url, interval_seconds, changes FROM revisits WHERE crawl_id = 'site'")}
    assert rows["/news"] == (pytest.approx(60 + (3600 - 60) * 0.8 ** 8), 8)  # shrunk toward the 60 s minimum
    assert rows["/static"] == (pytest.approx(3600 * 1.4 ** 4), 0)
    assert rows["/about"] == (pytest.approx(3600 * 1.4 ** 4), 0)
    assert store.query("SELECT count(*) FROM pages WHERE url = ?", [changing.base_url + "/about"]) == [(1,)]


def test_a_batch_landed_twice_moves_a_url_on_once_and_a_pass_admits_only_unknown_or_due_urls(store, frontier):
    first = build_crawl_request(["http://a.example/"], crawl_id="fam", every="2h")
    first = replace(first, submitted_at=first.submitted_at - 3 * 3600)  # passes an hour and two after it
    frontier.register(first)
    items = [FrontierURL("fam", "http://a.example/", 0)]
    land(store, "b1", items, [fetch_result("http://a.example/", page_html("home", "/x"))])
    land(store, "b1", items, [fetch_result("http://a.example/", page_html("home", "/x"))])  # a retry
    assert store.query("SELECT interval_seconds, changes, next_due_at - checked_at FROM revisits") == [
        (7200.0, 0, timedelta(hours=2))]
    t0 = datetime.fromtimestamp(first.submitted_at, UTC).replace(tzinfo=None)
    soon = build_crawl_request(["http://a.example/"], crawl_id="fam@soon", every="2h")
    frontier.register(replace(soon, submitted_at=(t0 + timedelta(hours=1)).replace(tzinfo=UTC).timestamp()))
    assert frontier_rows(store, "fam@soon") == {}  # its seed was fetched an hour ago: not due
    # URLs found elsewhere (sitemaps) follow the same rule: the known one is not due, the new one enters.
    frontier.admit("fam@soon", ["http://a.example/", "http://a.example/new"], 1)
    assert set(frontier_rows(store, "fam@soon")) == {"http://a.example/new"}
    due = build_crawl_request(["http://a.example/"], crawl_id="fam@due")
    frontier.register(replace(due, submitted_at=(t0 + timedelta(hours=2)).replace(tzinfo=UTC).timestamp()))
    assert frontier_rows(store, "fam@due") == {"http://a.example/": (0, "queued")}
