"""Adaptive revisits (crawl_platform.store.revisits) through recurring passes of the engine's loop,
on a loopback site whose pages change at different rates; time is injected, never slept."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.pipeline.schedules import plan_due_passes
from crawl_platform.pipeline.submission import build_crawl_request
from tests.sites.changing import ChangingSite
from tests.unit.crawl_rows import crawl_loop

PAGES = ("/", "/news", "/about", "/static")


@pytest.fixture
def changing():
    with ChangingSite() as site:
        yield site


def test_often_changing_pages_are_fetched_more_often_than_stable_ones(settings, store, changing):
    bus = InMemoryBus(settings.seeds_topic, settings.frontier_topic, settings.dead_letter_topic, partitions=2)
    bus.ensure_topics()
    loop = crawl_loop(settings, bus, store)
    first = build_crawl_request([changing.base_url + "/"], crawl_id="site", every="1h", max_depth=3)
    loop.crawler.frontier.register(first)
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
