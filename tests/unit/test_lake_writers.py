"""Writer processes racing on one lake (crawl_platform.store.database): the crawl's invariants hold.

DuckLake enforces no key, so a URL admitted once per crawl, one ``(url, version)`` per page, one
row per crawl and per host, and a closed URL that stays closed are kept by the code under the
lake's write lock. Here several processes start together on a new lake and each registers the
same crawl, admits overlapping links through the real frontier, lands overlapping pages and
expands its batches, round after round; afterwards the tables hold exactly what one careful
writer would have left. Once on the embedded SQLite catalog, once on PostgreSQL.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections import Counter
from typing import Any

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.parse.html import parse_html
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.hosts import HostRecord
from crawl_platform.store.location import LakeLocation
from crawl_platform.urls import canonicalize
from tests.unit.crawl_rows import crawl_request, fetch_result, frontier_rows, page_html

CRAWL = "race"
SITE = "http://race.test"
SEED = canonicalize(SITE + "/")
WRITERS = 3
ROUNDS = 3
PAGES_PER_ROUND = 6  # round r lands pages 2r .. 2r+5: consecutive rounds overlap by four pages


def page_url(k: int) -> str:
    return f"{SITE}/p{k}"


def round_pages(r: int) -> range:
    return range(2 * r, 2 * r + PAGES_PER_ROUND)


def outcome_of_page(k: int) -> str:
    """Every writer fetches page k with the same status: 404 (failed) for every third page."""
    return "failed" if k % 3 == 0 else "fetched"


def links_of_page(k: int) -> list[str]:
    """Page k links to page k+2 (so round r's links are round r+1's pages), to a page no round
    lands, and to one of five pages that many pages link to."""
    return [page_url(k + 2), page_url(k + 50), page_url(100 + k % 5)]


def race_writer(catalog: str, data_path: str, writer: int, start: Any, failures: Any) -> None:
    """One writer process: open the lake when every writer is ready, register the crawl, admit the
    first round's pages, then land and expand ROUNDS overlapping batches through the engine's own
    code (each expansion admits the next round's pages)."""
    try:
        store = CrawlStore(LakeLocation(catalog, data_path), write_timeout_s=300)
        bus = InMemoryBus()
        bus.ensure_topics()
        frontier = Frontier(store, bus)
        start.wait(timeout=300)
        store.ensure_schema()  # the lake is new: whichever writer comes first creates it
        frontier.register(crawl_request(CRAWL, SEED, max_pages=10_000, max_depth=10))
        frontier.admit(CRAWL, [page_url(k) for k in round_pages(0)], 1)
        for r in range(ROUNDS):
            batch_id = f"w{writer}-r{r}"
            urls = [page_url(k) for k in round_pages(r)]
            # Every landing differs from the page's latest version, so each one is a new version.
            results = {page_url(k): fetch_result(page_url(k), page_html(f"{batch_id} p{k}", *links_of_page(k)),
                                                 status=404 if outcome_of_page(k) == "failed" else 200)
                       for k in round_pages(r)}
            parsed = {url: parse_html(res.body, res.final_url, res.content_type) for url, res in results.items()}
            land_batch(store, batch_id, [FrontierURL(CRAWL, url, r + 1) for url in urls], results, parsed,
                       hosts=[HostRecord(SITE, delay_ms=100 * writer + r)])
            frontier.expand(batch_id)
    except BaseException:
        failures.put(f"writer {writer}: {traceback.format_exc()}")
        raise


def race(location: LakeLocation) -> None:
    """Start WRITERS writer processes on ``location`` together; fail with their traceback if one fails."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(WRITERS)
    failures = ctx.Queue()
    writers = [ctx.Process(target=race_writer, args=(location.catalog, location.data_path, w, start, failures))
               for w in range(WRITERS)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=500)
    errors = [failures.get(timeout=5) for _ in range(failures.qsize())] if not failures.empty() else []
    for process in writers:
        if process.is_alive():
            process.kill()
    assert not errors, "\n".join(errors)
    assert [p.exitcode for p in writers] == [0] * WRITERS


def assert_race_left_one_writers_tables(store: CrawlStore) -> None:
    landings = Counter(page_url(k) for _ in range(WRITERS) for r in range(ROUNDS) for k in round_pages(r))
    landed = {page_url(k): k for r in range(ROUNDS) for k in round_pages(r)}

    assert store.query("SELECT crawl_id FROM crawls") == [(CRAWL,)]
    assert store.query("SELECT origin FROM hosts") == [(SITE,)]
    # One row per URL of the crawl, each in the state its last transition left: closed as its
    # batches fetched it, or queued (the bus acknowledged it) when no batch fetched it.
    assert store.query("SELECT url FROM frontier GROUP BY crawl_id, url HAVING count(*) > 1") == []
    linked = {dst for k in landed.values() for dst in links_of_page(k)}
    assert {url: state for url, (_depth, state) in frontier_rows(store, CRAWL).items()} == {
        SEED: "queued",
        **dict.fromkeys(linked - landed.keys(), "queued"),
        **{url: outcome_of_page(k) for url, k in landed.items()},
    }
    # Every landing of a page added its next version: versions 1..n, none twice, none lost.
    versions = store.query("SELECT url, list(version ORDER BY version) FROM pages GROUP BY url")
    assert dict(versions) == {url: list(range(1, n + 1)) for url, n in landings.items()}
    assert store.query("SELECT url, version FROM documents GROUP BY ALL HAVING count(*) > 1") == []
    assert store.query("SELECT count(*) FROM documents")[0][0] == sum(landings.values())
    assert store.query("SELECT count(DISTINCT batch_id), count(*) FROM batch_items") == [
        (WRITERS * ROUNDS, WRITERS * ROUNDS * PAGES_PER_ROUND)]


def test_racing_writer_processes_keep_every_invariant(lake_settings):
    lake = LakeLocation.from_settings(lake_settings)
    race(lake)

    store = CrawlStore(lake)
    try:
        assert_race_left_one_writers_tables(store)
    finally:
        store.close()
