"""Landing while the fetch goes on (crawl_platform.pipeline.streaming, ParsePool.harvest): a polite
shard's pages are readable before its batch lands, each once, with their documents, links and
archived responses, on a real loopback site, broker and lake."""

from __future__ import annotations

import logging
import threading
import time

from crawl_platform.archive.reader import read_response
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.parse.pool import ParsePool, ParseWorkers
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.streaming import StreamingLanding
from crawl_platform.store.database import CrawlStore
from tests.unit.crawl_rows import crawl_request, fetch_result, frontier_rows, page_html

DELAY_S = 0.15


def _polite_crawler(settings, bus, store, land_every_s: float) -> BatchCrawler:
    fetcher = Fetcher(settings.user_agent, host_delay_s=DELAY_S, allowed_networks=["127.0.0.0/8"])
    return BatchCrawler(bus, store, fetcher, "lxml", land_every_s=land_every_s)


def _batch_of_every_page(crawler: BatchCrawler, bus, server, crawl_id: str):
    """The site's every page registered as a seed of ``crawl_id``, read back as one batch."""
    urls = server.site.expected_urls(server.base_url)
    crawler.frontier.register(crawl_request(crawl_id, *urls, max_depth=5))
    ranges = [OffsetRange(p, 0, hi) for p, (_lo, hi) in bus.watermarks(bus.frontier_topic).items() if hi]
    return urls, crawler.prepare("b1", ranges, refetch_done=False)


def _count_while(store: CrawlStore, busy: threading.Event) -> list[int]:
    """What a reader sees of ``pages`` every 0.1 s while ``busy`` is set (a thread's list)."""
    seen: list[int] = []

    def read() -> None:
        while busy.is_set():
            seen.append(store.query("SELECT count(*) FROM pages")[0][0])
            time.sleep(0.1)

    threading.Thread(target=read, daemon=True).start()
    return seen


def test_a_polite_shard_lands_its_pages_in_rounds_while_it_fetches(settings, bus, store):
    with DemoSite(n_pages=14, seed=7).serve() as server:
        crawler = _polite_crawler(settings, bus, store, land_every_s=0.4)
        urls, prepared = _batch_of_every_page(crawler, bus, server, "st")
        busy = threading.Event()
        busy.set()
        seen = _count_while(store, busy)
        try:
            shard = crawler.fetch_shard(prepared.requests, prepared.hosts, "b1")
        finally:
            busy.clear()
        report = crawler.land(prepared, [shard])
        crawler.expand("b1")
        served = [r.path for r in server.requests if r.path != "/robots.txt"]
        base = server.base_url
    # A reader saw pages before the batch landed, and more of them as the fetch went on.
    assert max(seen) > 0
    assert len(set(seen)) >= 3
    assert shard.streamed.rounds >= 2
    assert 0 < len(shard.streamed.urls) <= len(urls)
    assert report.streamed == len(shard.streamed.urls)
    # Every page once, with the batch's id, its document, links and archived response.
    assert sorted(set(served)) == sorted(u.removeprefix(base) for u in urls)
    rows = store.query("SELECT url, version, batch_id, warc_file, warc_offset, warc_length, content_length "
                       "FROM pages")
    assert sorted(r[0] for r in rows) == sorted(urls)
    assert {(r[1], r[2]) for r in rows} == {(1, "b1")}
    for url, _version, _batch, warc_file, offset, length, content_length in rows:
        assert len(read_response(store.archive, warc_file, offset, length)[1]) == content_length, url
    html = store.query("SELECT count(*) FROM pages WHERE content_type LIKE 'text/html%'")[0][0]
    assert store.query("SELECT count(*) FROM documents")[0][0] == html > len(urls) / 2
    assert report.new_versions == len(urls)
    assert report.bytes == sum(r[6] for r in rows)
    assert all(shard.results[url].body == b"" for url in shard.streamed.urls)  # let go of once landed
    assert report.links == store.query("SELECT count(*) FROM links")[0][0] > 0
    # The batch's own landing wrote every item and closed the crawl's URLs.
    outcomes = store.query("SELECT outcome, count(*) FROM batch_items WHERE batch_id = 'b1' GROUP BY outcome")
    assert dict(outcomes) == {"fetched": len(urls) - 1, "failed": 1}  # the site's /missing
    states = frontier_rows(store, "st")
    assert sorted(states[url][1] for url in urls) == ["failed"] + ["fetched"] * (len(urls) - 1)
    # Each round is a snapshot of its own, before the batch's.
    ((inserts,),) = store.query(
        "SELECT count(DISTINCT snapshot_id) FROM ducklake_table_changes(?, 'main', 'pages', 0, ?) "
        "WHERE change_type = 'insert'", [store.alias, store.snapshot_id()])
    assert inserts >= 2


def test_a_round_that_cannot_write_leaves_its_pages_to_the_batch(settings, bus, store, caplog):
    """The lake's write lock held by another writer for the whole fetch: every round fails, and
    the batch's landing writes every page, once."""
    with DemoSite(n_pages=8, seed=9).serve() as server:
        crawler = _polite_crawler(settings, bus, store, land_every_s=0.4)
        blocked = CrawlStore(store.location, write_timeout_s=0.2)
        crawler.shard_fetcher.streaming = StreamingLanding(blocked, 0.4, store.archive)
        urls, prepared = _batch_of_every_page(crawler, bus, server, "lk")
        holder = CrawlStore(store.location)
        with holder.lake_write_lock(), caplog.at_level(logging.WARNING, "crawl_platform.pipeline.streaming"):
            shard = crawler.fetch_shard(prepared.requests, prepared.hosts, "b1")
        report = crawler.land(prepared, [shard])
    assert shard.streamed.rounds == 0
    assert not shard.streamed.urls
    assert sum("landing pages early failed" in r.getMessage() for r in caplog.records) == 1
    assert report.new_versions == len(urls) == report.fetched + report.failed
    assert sorted(r[0] for r in store.query("SELECT url FROM pages WHERE version = 1")) == sorted(urls)


def test_a_fetch_step_retried_after_its_rounds_landed_adds_no_version(settings, bus, store):
    """A fetch step killed after some rounds is run again (a step retry): its pages are fetched
    again, land again in rounds or with the batch, and each stays one version."""
    with DemoSite(n_pages=8, seed=11).serve() as server:
        crawler = _polite_crawler(settings, bus, store, land_every_s=0.4)
        urls, prepared = _batch_of_every_page(crawler, bus, server, "rt")
        lost = crawler.fetch_shard(prepared.requests, prepared.hosts, "b1")  # its step died after this
        again = crawler.fetch_shard(prepared.requests, prepared.hosts, "b1")
        report = crawler.land(prepared, [again])
    assert lost.streamed.rounds >= 1
    # What the lost step landed gets no new version; the rest (fetched after its last round) does.
    assert again.streamed.urls
    assert not again.streamed.changed & lost.streamed.urls
    assert report.new_versions == len(urls) - len(lost.streamed.changed)
    assert store.query("SELECT count(*), count(DISTINCT url), max(version) FROM pages") == [(len(urls), len(urls), 1)]
    assert dict(store.query("SELECT outcome, count(*) FROM batch_items GROUP BY outcome")) == {
        "fetched": len(urls) - 1, "failed": 1}


def test_a_shard_fetched_within_the_interval_lands_with_its_batch_alone(settings, bus, store):
    with DemoSite(n_pages=6, seed=4).serve() as server:
        crawler = _polite_crawler(settings, bus, store, land_every_s=60.0)
        urls, prepared = _batch_of_every_page(crawler, bus, server, "fast")
        shard = crawler.fetch_shard(prepared.requests, prepared.hosts, "b1")
        report = crawler.land(prepared, [shard])
    assert shard.streamed.rounds == 0
    assert (report.streamed, report.new_versions) == (0, len(urls))
    ((inserts,),) = store.query(
        "SELECT count(DISTINCT snapshot_id) FROM ducklake_table_changes(?, 'main', 'pages', 0, ?) "
        "WHERE change_type = 'insert'", [store.alias, store.snapshot_id()])
    assert inserts == 1


def test_harvest_hands_each_parse_out_once_and_parsed_gives_the_rest():
    pages = [fetch_result(f"http://h.test/{i}", page_html(f"p{i}", f"/x{i}")) for i in range(40)]
    for workers in (0, 1):
        with ParsePool(workers, "lxml", main_content=False, chunk_pages=8) as pool:
            for page in pages[:25]:
                pool.add(page)
            first = pool.harvest(wait_s=30.0)
            for page in pages[25:]:
                pool.add(page)
            rest = pool.parsed()
        assert set(first) == {p.url for p in pages[:25]}, workers
        assert set(rest) == {p.url for p in pages[25:]}, workers
        assert first["http://h.test/3"].title == "p3"
        assert [dst for dst, _anchor in rest["http://h.test/30"].links] == ["http://h.test/x30"]


def test_fetch_threads_wait_while_too_many_pages_wait_for_their_parse():
    """A worker slower than the fetch: the thread that hands over a chunk waits until no more than
    ``max_unparsed`` pages are waiting, so a page waits for its parse a bounded time."""
    big = "".join(f"<p>paragraph {i} <a href='/l{i}'>l</a></p>" for i in range(20000))
    pages = [fetch_result(f"http://h.test/{i}", f"<html><body>{big}</body></html>".encode()) for i in range(12)]
    workers = ParseWorkers(1)
    try:
        deadline = time.monotonic() + 60
        while not workers.ready:
            assert time.monotonic() < deadline, "the parse worker did not start"
            time.sleep(0.05)
        with ParsePool(workers, "lxml", main_content=False, chunk_pages=1, max_unparsed=3) as pool:
            waiting = []
            for page in pages:
                pool.add(page)
                waiting.append(sum(len(c) for c, f in pool._submitted if f is not None and not f.done()))
            parsed = pool.parsed()
    finally:
        workers.close()
    assert max(waiting) <= 3
    assert sorted(parsed) == sorted(p.url for p in pages)
