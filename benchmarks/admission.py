"""What one batch's link admission costs as a crawl's frontier grows: the constant behind "admission's
cost per batch independent of the crawl's size".

Makes a lake in a temporary folder (its catalog an embedded DuckDB file, or ``--postgres`` for a new
database on the machine's PostgreSQL), registers one crawl and grows its ``frontier`` in bulk to
each size given (rows of finished pages, as a long crawl leaves them, a few files each), each with
its ``pages`` row and ``--grown-links`` ``links`` rows (20 by default, as the generated site's
pages have), since a batch's admission reads its pages' links out of those tables. At each
size it lands ``--batches`` batches of ``--urls`` parsed pages with ``--links`` links each, half of
them new URLs and half already in the frontier, as a batch run's landing step does, and times the
frontier step's part: ``Frontier.expand`` (scope checks, then one write transaction that admits
the new links within the caps and closes the batch's items) and marking the admitted URLs queued.
Prints the median seconds of each at each size.

    .venv/bin/python benchmarks/admission.py --sizes 10000 100000 1000000
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.measure import loadavg
from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import CrawlRequest, FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchResult
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.parse.html import parse_html
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.store.database import CrawlStore
from tests.conftest import fresh_postgres_database, lake_catalog

CRAWL, HOST = "grow", "grow.bench.example"


def _page(url: str, batch: int, index: int, links: int) -> bytes:
    """Links: half to pages of the grown frontier (seen), half to new pages of the next level."""
    hrefs = "".join(
        f'<a href="http://{HOST}/seen/{(batch * 7919 + index * links + k) % 10_000}">s</a>' if k % 2 else
        f'<a href="http://{HOST}/new/b{batch}/p{index * links + k}">n</a>' for k in range(links))
    return f"<html><head><title>{url}</title></head><body><p>text</p>{hrefs}</body></html>".encode()


def grow(store: CrawlStore, rows: int, start: int, links: int) -> None:
    """Add frontier rows ``start`` .. ``rows`` of the crawl (finished pages), each with its page
    version and ``links`` links, in chunks of 200,000 pages (one landing each)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    with store.read() as con:  # the lake's links may predate their batch_id (a --repo of an older release)
        link_columns = {row[0] for row in con.execute("DESCRIBE links").fetchall()}
    for lo in range(start, rows, 200_000):
        hi = min(rows, lo + 200_000)
        # Old pages' URLs on both sides of the new ones' (/level/...), as a real crawl's interleave:
        # no file's URL range leaves a new batch's pages out.
        url = (f"CASE WHEN i < 10000 THEN 'http://{HOST}/seen/' || i "
               f"ELSE 'http://{HOST}/' || CASE WHEN i % 2 = 0 THEN 'a' ELSE 'z' END || '/old/' || i END")
        batch_id = f"grown-{lo}"
        with store.write() as con:
            con.execute(
                f"""INSERT INTO frontier (url, crawl_id, depth, state, discovered_at, host, updated_at, batch_id)
                    SELECT {url}, '{CRAWL}', 2, 'fetched', $1, '{HOST}', $1, '{batch_id}'
                    FROM range({lo}, {hi}) t(i)""", [now])
            con.execute(
                f"""INSERT INTO pages (url, crawl_id, version, status, fetched_at, content_hash, content_type,
                                       batch_id, content_length, elapsed_ms)
                    SELECT {url}, '{CRAWL}', 1, 200, $1, md5(i::VARCHAR), 'text/html', '{batch_id}', 4096, 1.0
                    FROM range({lo}, {hi}) t(i)""", [now])
            tagged = "batch_id" in link_columns
            con.execute(
                f"""INSERT INTO links (src_url, src_version, dst_url, anchor_text{", batch_id" if tagged else ""})
                    SELECT {url}, 1, 'http://{HOST}/a/old/' || ((i * 7919 + k) % {rows}), 'a'
                           {f", '{batch_id}'" if tagged else ""}
                    FROM range({lo}, {hi}) t(i), range({links}) l(k)""")


def measure(store: CrawlStore, frontier: Frontier, size: int, batches: int, urls: int, links: int,
            first_batch: int) -> dict[str, float]:
    expand_s, queued_s = [], []
    for batch in range(first_batch, first_batch + batches):
        pages = [f"http://{HOST}/level/b{batch}/p{i}" for i in range(urls)]
        now = datetime.now(UTC).replace(tzinfo=None)
        results = {u: FetchResult(u, u, 200, "text/html", _page(u, batch, i, links), None, now, 1.0)
                   for i, u in enumerate(pages)}
        parsed = {u: parse_html(r.body, u, r.content_type) for u, r in results.items()}
        batch_id = f"e0.p0-{batch * urls}-{(batch + 1) * urls}"
        land_batch(store, batch_id, [FrontierURL(CRAWL, u, 1) for u in pages], results, parsed)
        clock = time.perf_counter()
        admitted = frontier.admission.expand(batch_id)
        expand_s.append(time.perf_counter() - clock)
        clock = time.perf_counter()
        frontier.states.mark_queued(admitted.urls)
        queued_s.append(time.perf_counter() - clock)
    return {"size": size, "expand_s": statistics.median(expand_s), "queued_s": statistics.median(queued_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="frontier rows of the crawl to measure at, ascending")
    parser.add_argument("--batches", type=int, default=5, help="batches landed and expanded at each size (5)")
    parser.add_argument("--urls", type=int, default=500, help="pages per batch (500)")
    parser.add_argument("--links", type=int, default=20, help="links per page (20)")
    parser.add_argument("--grown-links", type=int, default=20,
                        help="links rows of each grown page (20): what a read of the whole links table pays for")
    parser.add_argument("--postgres", action="store_true", help="the lake's catalog on the machine's PostgreSQL")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="admission-")))
        catalog = {"lake_catalog": lake_catalog(stack.enter_context(fresh_postgres_database()))} \
            if args.postgres else {}
        settings = Settings(lake_path=folder / "lake", lake_data_path=str(folder / "data"), **catalog)
        store = CrawlStore.from_settings(settings)
        store.ensure_schema()
        bus = InMemoryBus()
        bus.ensure_topics()
        frontier = Frontier(store, bus)
        frontier.register(CrawlRequest(CRAWL, (f"http://{HOST}/",), 10**9, 1000, "host", time.time()))
        grown, batch = 0, 0
        print(f"catalog: {'PostgreSQL' if args.postgres else 'DuckDB file'}; batches of {args.urls} pages x "
              f"{args.links} links, half of them new", flush=True)
        for size in args.sizes:
            grow(store, size, grown, args.grown_links)
            grown = size
            before = loadavg()
            result = measure(store, frontier, size, args.batches, args.urls, args.links, batch)
            batch += args.batches
            print(f"frontier {size:>9,} rows: expand {1000 * result['expand_s']:.0f} ms, mark queued "
                  f"{1000 * result['queued_s']:.0f} ms (medians of {args.batches}), load {before} -> {loadavg()}",
                  flush=True)


if __name__ == "__main__":
    main()
