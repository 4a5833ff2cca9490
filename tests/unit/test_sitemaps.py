"""Sitemaps as seeds (crawl_platform.fetch.sitemaps, and SeedIntake for crawls with ``use_sitemaps``):
robots.txt ``Sitemap:`` lines, /sitemap.xml, indexes, gzip, plain text, and hostile sitemaps."""

from __future__ import annotations

import gzip
import itertools
import time
import tracemalloc

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import CrawlRequest, encode
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.fetch.sitemaps import discover_sitemap_urls, parse_sitemap
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.urls import CrawlScope
from tests.sites.hostile import HostileSite, Reply, gzip_bomb
from tests.sites.sitemap_site import SitemapSite
from tests.unit.conftest import loopback_fetcher

XML = {"Content-Type": "application/xml"}


def _urlset(*locs: str) -> bytes:
    entries = "".join(f"<url><loc>{loc}</loc><lastmod>2026-01-01</lastmod></url>" for loc in locs)
    return (f'<?xml version="1.0" encoding="UTF-8"?>'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>').encode()


def _index(*locs: str) -> bytes:
    entries = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return (f'<?xml version="1.0" encoding="UTF-8"?>'
            f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>').encode()


def _serve_sitemaps(site: HostileSite) -> None:
    site.robots = Reply(200, f"User-agent: *\nDisallow: /private\nSitemap: {site.url('/sitemap-index.xml')}\n".encode())
    site.static["/sitemap-index.xml"] = Reply(200, _index(site.url("/sitemap-a.xml"), site.url("/sitemap-b.xml.gz")),
                                             XML)
    site.static["/sitemap-a.xml"] = Reply(200, _urlset(
        site.url("/page/1"), site.url("/page/2#frag"), "http://127.0.0.2:1/elsewhere", "not a url",
        site.url("/page/1")), XML)
    site.static["/sitemap-b.xml.gz"] = Reply(200, gzip.compress(_urlset(site.url("/page/3"), site.url("/page/4"))),
                                            {"Content-Type": "application/x-gzip"})


def test_robots_sitemap_lines_indexes_and_gzip_sitemaps_give_page_urls(hostile):
    _serve_sitemaps(hostile)
    scope = CrawlScope.for_seeds("host", [hostile.url("/")])
    urls = discover_sitemap_urls(loopback_fetcher(), hostile.url("/"), limit=100, in_scope=scope.admits)
    assert urls == [hostile.url(f"/page/{k}") for k in (1, 2, 3, 4)]
    hostile.settle()
    assert hostile.request_count("/robots.txt") == 1
    assert hostile.request_count("/sitemap-index.xml") == 1


def test_the_limit_stops_discovery_early(hostile):
    _serve_sitemaps(hostile)
    urls = discover_sitemap_urls(loopback_fetcher(), hostile.url("/"), limit=2)
    assert urls == [hostile.url("/page/1"), hostile.url("/page/2")]
    hostile.settle()
    assert hostile.request_count("/sitemap-b.xml.gz") == 0  # not fetched: the limit was reached first


def test_sitemap_xml_is_tried_when_robots_txt_names_none(hostile):
    hostile.static["/sitemap.xml"] = Reply(200, _urlset(hostile.url("/page/5")), XML)
    assert discover_sitemap_urls(loopback_fetcher(), hostile.url("/"), limit=10) == [hostile.url("/page/5")]


def test_a_plain_text_sitemap_is_read(hostile):
    hostile.static["/sitemap.xml"] = Reply(200, f"{hostile.url('/page/6')}\n\n{hostile.url('/page/7')}\n".encode(),
                                           {"Content-Type": "text/plain"})
    assert discover_sitemap_urls(loopback_fetcher(), hostile.url("/"), limit=10) == [
        hostile.url("/page/6"), hostile.url("/page/7")]


def test_no_sitemap_at_all_gives_nothing(hostile):
    assert discover_sitemap_urls(loopback_fetcher(), hostile.url("/"), limit=10) == []


def test_a_gzip_bomb_sitemap_is_cut_off_at_the_size_cap(hostile):
    hostile.static["/sitemap.xml"] = Reply(200, gzip_bomb(), {"Content-Type": "application/gzip"})
    tracemalloc.start()
    try:
        urls = discover_sitemap_urls(loopback_fetcher(max_body_bytes=1024 * 1024), hostile.url("/"), limit=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert urls == []
    assert peak < 16 * 1024 * 1024  # not the 64 MiB it expands to


def test_entities_in_a_sitemap_are_not_expanded():
    laughs = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
              + b"".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i else "&lol;" * 10}">'.encode()
                         for i in range(9))
              + b']><urlset><url><loc>http://a.example/&lol8;</loc></url></urlset>')
    started = time.monotonic()
    kind, locs = parse_sitemap(laughs)
    assert time.monotonic() - started < 1.0
    assert kind == "urlset"
    assert all(len(loc) < 100 for loc in locs)


def test_sitemap_indexes_that_never_end_are_bounded(hostile):
    names = itertools.count()  # every index names five sitemaps nobody has seen yet
    hostile.routes["/sitemap.xml"] = lambda ex: ex.send(
        Reply(200, _index(*(hostile.url(f"/sitemap.xml?n={next(names)}") for _ in range(5))), XML))
    started = time.monotonic()
    assert discover_sitemap_urls(loopback_fetcher(), hostile.url("/"), limit=10, max_files=7) == []
    assert time.monotonic() - started < 3.0
    hostile.settle()
    assert len([s for s in hostile.requests if s.path.startswith("/sitemap.xml")]) == 7


# --- seed intake -------------------------------------------------------------------------------------

def _submit(bus: KafkaBus, request: CrawlRequest) -> OffsetRange:
    assert all(bus.publish(bus.seeds_topic, [(b"k", encode(request))]))
    (part,) = [p for p, (_, high) in bus.watermarks(bus.seeds_topic).items() if high]
    high = bus.watermarks(bus.seeds_topic)[part][1]
    return OffsetRange(part, high - 1, high)


def test_a_crawl_with_use_sitemaps_admits_sitemap_urls_at_depth_one(store, bus, hostile):
    _serve_sitemaps(hostile)
    intake = SeedIntake(bus, store, loopback_fetcher())
    request = CrawlRequest("maps", (hostile.url("/"),), 100, 3, "host", time.time(), use_sitemaps=True)
    report = intake.register(_submit(bus, request))
    assert report.crawls == ["maps"]
    rows = store.query("SELECT url, depth FROM frontier WHERE crawl_id = 'maps' ORDER BY url")
    assert rows == [(hostile.url("/"), 0), *((hostile.url(f"/page/{k}"), 1) for k in (1, 2, 3, 4))]
    assert report.admitted == 5


def test_without_use_sitemaps_no_sitemap_is_read(store, bus, hostile):
    _serve_sitemaps(hostile)
    intake = SeedIntake(bus, store, loopback_fetcher())
    request = CrawlRequest("plain", (hostile.url("/"),), 100, 3, "host", time.time())
    intake.register(_submit(bus, request))
    assert store.query("SELECT url FROM frontier WHERE crawl_id = 'plain'") == [(hostile.url("/"),)]
    hostile.settle()
    assert hostile.requests == []


def test_sitemap_urls_respect_max_pages(store, bus, hostile):
    _serve_sitemaps(hostile)
    request = CrawlRequest("small", (hostile.url("/"),), 3, 3, "host", time.time(), use_sitemaps=True)
    SeedIntake(bus, store, loopback_fetcher()).register(_submit(bus, request))
    assert store.query("SELECT count(*) FROM frontier WHERE crawl_id = 'small'") == [(3,)]


def test_intake_reads_sitemaps_within_the_hosts_politeness_and_saves_its_robots_txt(store, bus):
    with SitemapSite(pages=2, crawl_delay_s=0.5) as site:
        request = CrawlRequest("polite", (site.base_url + "/",), 100, 3, "host", time.time(), use_sitemaps=True)
        SeedIntake(bus, store, loopback_fetcher()).register(_submit(bus, request))
        (host,) = store.query("SELECT origin, robots_status, robots_body FROM hosts")
        assert host == (site.base_url, 200, site.robots_txt())
        # The batch run is another process with a fetcher of its own: only the hosts table links them.
        ranges = [OffsetRange(p, low, high) for p, (low, high) in bus.watermarks(bus.frontier_topic).items()
                  if high > low]
        report = BatchCrawler(bus, store, loopback_fetcher()).fetch_and_land("e0.polite", ranges)
        assert report.fetched == 5  # the seed and the four sitemap pages
        seen = sorted(site.requests, key=lambda s: s.started_at)
    assert [s.path for s in seen[:3]] == ["/robots.txt", "/sitemap-pages.xml", "/sitemap.xml"]
    assert [s.path for s in seen].count("/robots.txt") == 1  # the batch run read it from the hosts table
    gaps = [later.started_at - earlier.finished_at for earlier, later in itertools.pairwise(seen)]
    assert min(gaps) >= 0.45, f"requests to one host closer than its Crawl-delay of 0.5 s: {gaps}"
