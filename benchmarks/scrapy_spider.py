"""The Scrapy side of the comparison: a plain follow-all-links CrawlSpider, run as its own process.

It obeys robots.txt, stays on the seed's host, follows every link (Scrapy's duplicate filter drops
URLs it has seen), and has no item pipeline: each response's URL is written to `--out`, one per
line, so the benchmark can check that every page was fetched exactly once. `--stats` receives
Scrapy's own stats plus the wall-clock time of the first page, as JSON. Per-host concurrency is
`--concurrency` (the platform fetches a host with one worker, so the fair setting is 1) and the
delay between two requests to a host is `--delay` (none by default). Several `--start` URLs, one
per host, make a broad crawl. `--timeout` closes the spider, so the run always ends.

    .venv/bin/python benchmarks/scrapy_spider.py --start http://127.0.0.1:PORT/ --out urls.txt
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

USER_AGENT = "scrapy-bench (+crawl-platform benchmarks)"


class FollowAllSpider(CrawlSpider):
    name = "follow_all"
    rules = (Rule(LinkExtractor(), callback="record", follow=True),)

    def __init__(self, start: list[str], out: IO[str], **kwargs: Any) -> None:
        self.start_urls = start
        self.allowed_domains = sorted({urlsplit(url).hostname or "" for url in start})
        self.out = out
        self.first_page_at: float | None = None
        self.pages = 0
        super().__init__(**kwargs)

    def parse_start_url(self, response: Response, **kwargs: Any) -> list[Any]:
        return self.record(response)

    def record(self, response: Response) -> list[Any]:
        if self.first_page_at is None:
            self.first_page_at = time.time()
        self.pages += 1
        self.out.write(response.url + "\n")
        return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", required=True, nargs="+", help="start URLs, one per host")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stats", type=Path)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--delay", type=float, default=0.0,
                        help="DOWNLOAD_DELAY in seconds between two requests to one host (0)")
    args = parser.parse_args()
    if any(not (urlsplit(url).hostname or "").startswith("127.") for url in args.start):
        parser.error("the benchmark crawls loopback sites only")

    process = CrawlerProcess(settings={
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": USER_AGENT,
        # Never the global limit: every host may have its requests in flight at once.
        "CONCURRENT_REQUESTS": max(16, args.concurrency * len(args.start)),
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "CONCURRENT_REQUESTS_PER_IP": 0,
        "DOWNLOAD_DELAY": args.delay,
        "RANDOMIZE_DOWNLOAD_DELAY": False,  # the delay exactly, as the platform keeps it
        "AUTOTHROTTLE_ENABLED": False,
        "CLOSESPIDER_TIMEOUT": args.timeout,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "ITEM_PIPELINES": {},
    })
    with args.out.open("w") as out:
        crawler = process.create_crawler(FollowAllSpider)
        process.crawl(crawler, start=args.start, out=out)
        process.start()
    spider = crawler.spider
    stats = {k: v for k, v in (crawler.stats.get_stats() if crawler.stats else {}).items()
             if isinstance(v, int | float | str)}
    stats["first_page_at"] = spider.first_page_at if spider else None  # wall clock, for the parent
    stats["pages"] = spider.pages if spider else 0
    if args.stats:
        args.stats.write_text(json.dumps(stats, indent=1, default=str))


if __name__ == "__main__":
    main()
