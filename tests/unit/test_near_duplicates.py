"""Near-duplicates of a real crawl (crawl_platform.dedup.near_duplicates after the engine's crawl loop):
a generated news site on loopback with a printer version, tracking variants and an exact mirror
planted among distinct articles in one heavy layout; the groups found are exactly the planted ones,
a second run replaces them, and an unknown crawl is refused before anything is written."""

from __future__ import annotations

import pytest

from crawl_platform.dedup.near_duplicates import UnknownCrawlError, find_near_duplicates
from tests.unit.crawl_rows import crawl_site

ROWS = ("SELECT group_id, url, version, representative, kind, distance FROM near_duplicates WHERE crawl_id = ? "
        "ORDER BY ALL")


def test_a_crawl_of_a_site_with_planted_copies_finds_exactly_those_groups(settings, bus, store, news_site):
    site, pages, planted = news_site
    crawl_site(settings, bus, store, site.url("/"), "news")
    assert {u for (u,) in store.query("SELECT url FROM documents")} == {site.url(p) for p in pages}

    report = find_near_duplicates(store, ["news"])
    assert (report.crawls, report.documents) == (["news"], len(pages))
    assert (report.groups, report.exact_groups, report.largest_group, report.pages_in_groups) == (3, 1, 3, 7)
    rows = store.query(ROWS, ["news"])
    found = {}
    for group_id, url, _version, representative, _kind, _distance in rows:
        found.setdefault(group_id, (representative, set()))[1].add(url[len(site.base_url):])
    assert sorted(members for _, members in found.values()) == sorted(planted)
    by_url = {url[len(site.base_url):]: (version, representative[len(site.base_url):], kind, distance)
              for _group, url, version, representative, kind, distance in rows}
    printed = by_url["/news/1/print"]
    assert printed[:3] == (1, "/news/1", "near")
    assert printed[3] <= 3  # the "printed from" line is all that differs in its main text
    assert by_url["/news/1"] == (1, "/news/1", "exact", 0)
    assert by_url["/news/2?ref=feed"] == (1, "/news/2", "near", 0)  # only the chrome differs
    assert by_url["/news/2?ref=newsletter"] == (1, "/news/2", "near", 0)
    assert by_url["/mirror/news/3"] == (1, "/news/3", "exact", 0)
    assert [g for g, *_ in rows] == sorted(g for g, *_ in rows)
    assert {g for g, *_ in rows} == {1, 2, 3}

    # Regrouping the crawl replaces its rows (one snapshot), and leaves them as they were.
    again = find_near_duplicates(store)
    assert again.groups == 3
    assert store.query(ROWS, ["news"]) == rows
    assert store.query("SELECT count(*) FROM near_duplicates")[0][0] == 7


def test_an_unknown_crawl_is_refused_and_nothing_is_written(store):
    with pytest.raises(UnknownCrawlError, match=r"^unknown crawl: nope \(crawls in the lake: none\)$"):
        find_near_duplicates(store, ["nope"])
    assert store.query("SELECT count(*) FROM near_duplicates") == [(0,)]
    empty = find_near_duplicates(store)
    assert (empty.crawls, empty.groups, empty.largest_group) == ([], 0, 0)
