"""Landing cost per page: batches of fetched pages landed and their links admitted, on the store of
whichever checkout ``--repo`` names.

Builds ``--batches`` batches of ``--urls`` fetched HTML pages (each page with ``--links`` links,
half of them new URLs), then for each batch times ``land_batch`` (pages, documents, links,
batch_items, hosts in one transaction) and ``Frontier.expand`` (admit the new links, close the
batch's items) on a fresh store, and prints the median and total seconds and the cost per page.
Runs against the lake of this checkout, or, with ``--repo`` pointing at a worktree of an older
commit, against that commit's store (the single DuckDB file before the lake), so the two are
measured with the same code and the same pages:

    .venv/bin/python benchmarks/landing.py
    git worktree add /tmp/prelake b322d48 && .venv/bin/python benchmarks/landing.py --repo /tmp/prelake
"""

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]), help="checkout whose store to measure")
parser.add_argument("--batches", type=int, default=5)
parser.add_argument("--urls", type=int, default=5000, help="URLs per batch")
parser.add_argument("--links", type=int, default=10, help="links per page")
args = parser.parse_args()
sys.path.insert(0, args.repo)

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import CrawlRequest, FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchResult
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.parse.html import parse_html
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.store.database import CrawlStore


def open_store(root: Path) -> CrawlStore:
    fields = Settings.model_fields
    if "lake_path" in fields:
        return CrawlStore.from_settings(Settings(lake_path=root / "lake"))
    return CrawlStore(root / "crawl.duckdb")  # the single-file store before the lake


def page(url: str, batch: int, index: int, links: int) -> bytes:
    hrefs = "".join(f'<a href="/b{batch + 1}/p{(index * links + k) % 100_000}">l{k}</a>' for k in range(links))
    return f"<html><head><title>{url}</title></head><body><p>text of {url}</p>{hrefs}</body></html>".encode()


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="landing-bench-"))
    store = open_store(root)
    store.ensure_schema()
    bus = InMemoryBus()
    bus.ensure_topics()
    frontier = Frontier(store, bus)
    frontier.register(CrawlRequest("bench", ("http://bench.example/",), 10**8, 1000, "host", time.time()))
    land_s: list[float] = []
    expand_s: list[float] = []
    for b in range(args.batches):
        urls = [f"http://bench.example/b{b}/p{i}" for i in range(args.urls)]
        now = datetime.now(UTC).replace(tzinfo=None)
        results = {u: FetchResult(u, u, 200, "text/html", page(u, b, i, args.links), None, now, 1.0)
                   for i, u in enumerate(urls)}
        parsed = {u: parse_html(r.body, u, r.content_type) for u, r in results.items()}
        items = [FrontierURL("bench", u, 1) for u in urls]
        batch_id = f"e0.p0-{b * args.urls}-{(b + 1) * args.urls}"
        clock = time.perf_counter()
        land_batch(store, batch_id, items, results, parsed)
        land_s.append(time.perf_counter() - clock)
        clock = time.perf_counter()
        frontier.expand(batch_id)
        expand_s.append(time.perf_counter() - clock)
    pages = args.batches * args.urls
    print(f"store: {'lake' if 'lake_path' in Settings.model_fields else 'duckdb file'} ({args.repo})")
    print(f"{args.batches} batches x {args.urls} URLs x {args.links} links")
    for name, seconds in (("land", land_s), ("expand", expand_s)):
        print(f"{name:>7}: median {statistics.median(seconds):.3f} s/batch, total {sum(seconds):.2f} s, "
              f"{1e6 * sum(seconds) / pages:.0f} us/page")
    total = sum(land_s) + sum(expand_s)
    print(f"  total: {total:.2f} s, {1e6 * total / pages:.0f} us/page")


if __name__ == "__main__":
    main()
