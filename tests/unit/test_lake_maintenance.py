"""Lake maintenance (crawl_platform.store.maintenance): fewer files, old snapshots gone, same rows.

A lake that landed many small batches (each a snapshot with its own small Parquet files, some
small enough to be inlined in the catalog, frontier updates leaving delete files) is maintained;
afterwards a query of the latest snapshot opens far fewer files, the snapshots past the retention
are gone, and every table holds exactly the rows it held before. Within the retention, time
travel still answers as before; files merged today stay on storage for the readers' grace. Once on
the embedded SQLite catalog, once on PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.maintenance import maintain_lake, measure_lake
from crawl_platform.store.schema import TABLES
from tests.conftest import lake_catalog
from tests.unit.crawl_rows import crawl_request, fetch_result, land, page_html

SITE = "http://maint.test"
CRAWL = "maint"
BATCHES = 10
PAGES = 12  # above DuckLake's inlining limit of 10 rows: these batches write Parquet files
INSERT_ONLY = ("crawls", "pages", "documents", "links", "batch_items")


def page_url(k: int) -> str:
    return f"{SITE}/p{k}"


def crawl_small_batches(store: CrawlStore) -> None:
    """BATCHES batches of PAGES pages, each linking to the next batch's pages, landed and expanded
    as a batch run does; every fourth batch re-lands the previous one's pages with new content
    (new versions), and a single-page batch now and then is small enough to be inlined."""
    bus = InMemoryBus()
    bus.ensure_topics()
    frontier = Frontier(store, bus)
    frontier.register(crawl_request(CRAWL, page_url(0), max_pages=100_000, max_depth=100))
    for b in range(BATCHES):
        first = (b - 1 if b % 4 == 3 else b) * PAGES
        count = 1 if b % 5 == 4 else PAGES
        ks = range(first, first + count)
        results = [fetch_result(page_url(k), page_html(f"batch {b} page {k}", page_url(k + PAGES), page_url(k + 1)))
                   for k in ks]
        land(store, f"b{b}", [FrontierURL(CRAWL, page_url(k), b) for k in ks], results)
        frontier.expand(f"b{b}")


def table_rows(store: CrawlStore, at: int | None = None) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every crawl table, sorted (at snapshot ``at``, or the latest)."""
    version = f" AT (VERSION => {at})" if at is not None else ""
    return {t: sorted(store.query(f"SELECT * FROM {t}{version}"), key=repr) for t in TABLES}


@pytest.fixture(params=["sqlite", "postgres"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> CrawlStore:
    """A new lake that crawled BATCHES small batches: embedded SQLite catalog or PostgreSQL."""
    if request.param == "sqlite":
        location = LakeLocation(f"sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}", f"{tmp_path / 'lake' / 'data'}/")
    else:
        location = LakeLocation(lake_catalog(request.getfixturevalue("postgres_url")), f"{tmp_path / 'data'}/")
    store = CrawlStore(location)
    store.ensure_schema()
    crawl_small_batches(store)
    yield store
    store.close()


def parquet_files(store: CrawlStore) -> int:
    """Parquet files on the lake's data path."""
    return sum(1 for _ in Path(store.location.data_path).rglob("*.parquet"))


def test_maintenance_merges_files_expires_snapshots_and_keeps_every_row(lake):
    before_rows = table_rows(lake)
    before = measure_lake(lake)
    assert before.current_files > 4 * BATCHES  # pages, documents, links and batch_items per batch, at least
    assert before.snapshots > 2 * BATCHES

    report = maintain_lake(lake, retention=timedelta(0), reader_grace=timedelta(0))

    assert report.before == before
    assert report.rows_flushed > 0  # the single-page batches and the frontier's small updates
    # The flush adds a snapshot and the latest is kept; the merge and rewrite then add theirs.
    assert report.snapshots_expired == before.snapshots
    assert report.after.snapshots <= 3
    # One file per insert-only table left for a query to open; the frontier, whose rows are
    # updated, keeps the files with a few deleted rows (DuckLake rewrites those once mostly deleted).
    files = dict(lake.query("SELECT table_name, file_count FROM ducklake_table_info(?)", [lake.alias]))
    assert {t: files[t] for t in INSERT_ONLY} == dict.fromkeys(INSERT_ONLY, 1)
    assert report.after.current_files < before.current_files / 4
    # Nothing left over on storage.
    assert report.after.data_files == report.after.current_files
    assert report.after.awaiting_removal == 0
    assert report.after.bytes < before.bytes
    assert parquet_files(lake) == report.after.data_files
    assert report.files_removed >= before.data_files
    assert table_rows(lake) == before_rows


def test_within_the_retention_time_travel_answers_as_before_and_merged_files_wait_out_the_grace(lake):
    middle = lake.snapshot_id() - BATCHES
    then = table_rows(lake, at=middle)
    before = measure_lake(lake)
    on_disk = set(Path(lake.location.data_path).rglob("*.parquet"))

    report = maintain_lake(lake, retention=timedelta(days=7))  # the default grace: 30 minutes

    assert report.snapshots_expired == 0
    assert report.after.current_files < before.current_files / 3
    assert table_rows(lake, at=middle) == then
    # A read that began before the merge may still scan the merged files: they stay for now.
    assert report.files_merged > 0
    assert report.files_removed == 0
    assert report.after.awaiting_removal == report.files_merged
    assert on_disk < set(Path(lake.location.data_path).rglob("*.parquet"))

    later = maintain_lake(lake, retention=timedelta(days=7), reader_grace=timedelta(0))

    assert later.files_removed == report.files_merged
    assert later.after.awaiting_removal == 0
    assert table_rows(lake, at=middle) == then
