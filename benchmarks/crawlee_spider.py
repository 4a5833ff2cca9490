"""The Crawlee side of the comparison: Crawlee for Python's ``ParselCrawler`` following every link
of its start hosts, run as its own process, set up as its guide shows.

It obeys robots.txt (``respect_robots_txt_file``), enqueues the links of each page on the same
hostname (``enqueue_links``, Crawlee's default strategy, its request queue dropping URLs it has
seen), keeps its storage in memory and has no item pipeline: each response's URL is written to
``--out``, one per line, so the benchmark can check that every page was fetched exactly once.
``--stats`` receives Crawlee's final statistics plus the wall-clock time of the first page, as
JSON. Crawlee limits concurrency for the whole crawl, not per host, and has no per-host delay
under a second: ``--concurrency`` is per host and is multiplied by the number of start hosts, so
on one host it is exact and on several it is the same total. ``--timeout`` stops the crawl, so
the run always ends.

    .venv/bin/python benchmarks/crawlee_spider.py --start http://127.0.0.1:PORT/ --out urls.txt
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from crawlee import ConcurrencySettings
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.storage_clients import MemoryStorageClient


async def crawl(start: list[str], out: Path, concurrency: int, timeout_s: float) -> dict[str, object]:
    total = concurrency * len(start)
    crawler = ParselCrawler(
        concurrency_settings=ConcurrencySettings(min_concurrency=total, desired_concurrency=total,
                                                 max_concurrency=total),
        respect_robots_txt_file=True, storage_client=MemoryStorageClient(), max_requests_per_crawl=10**8,
        configure_logging=False)
    first_page_at: float | None = None
    pages = 0
    with out.open("w") as urls:

        @crawler.router.default_handler
        async def record(context: ParselCrawlingContext) -> None:
            nonlocal first_page_at, pages
            if first_page_at is None:
                first_page_at = time.time()
            await context.enqueue_links()  # raises on a response Parsel cannot read as HTML: retried, then failed
            pages += 1
            urls.write((context.request.loaded_url or context.request.url) + "\n")

        try:
            stats = await asyncio.wait_for(crawler.run(start), timeout_s)
            finish_reason = "finished"
        except TimeoutError:
            stats, finish_reason = None, "timeout"
    result: dict[str, object] = {"finish_reason": finish_reason, "first_page_at": first_page_at, "pages": pages}
    if stats is not None:
        result.update({k: (v.total_seconds() if isinstance(v, timedelta) else v)
                       for k, v in stats.to_dict().items() if isinstance(v, int | float | str | timedelta)})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", required=True, nargs="+", help="start URLs, one per host")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stats", type=Path)
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight per start host (1)")
    parser.add_argument("--timeout", type=int, default=1800)
    args = parser.parse_args()
    if any(not (urlsplit(url).hostname or "").startswith("127.") for url in args.start):
        parser.error("the benchmark crawls loopback sites only")
    stats = asyncio.run(crawl(args.start, args.out, args.concurrency, args.timeout))
    if args.stats:
        args.stats.write_text(json.dumps(stats, indent=1, default=str))


if __name__ == "__main__":
    main()
