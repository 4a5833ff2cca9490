"""What the archive tests share: the hostile site's pages for the archive, a batch fetched from it
and landed the way a batch run does (shard fetcher with the archive on, then the lander), and the
command line run as a subprocess."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.fetch.retry import RetryPolicy
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.batch import BatchLander
from crawl_platform.pipeline.reader import BatchReport, PreparedBatch
from crawl_platform.pipeline.shard import ShardFetcher, ShardResult
from crawl_platform.store.database import CrawlStore
from tests.sites import dead_port
from tests.sites.hostile import Exchange, HostileSite, Reply, html_page
from tests.unit.conftest import loopback_fetcher
from tests.unit.crawl_rows import crawl_request

PLAIN = html_page("Plain", "/zipped", text="the first page")
ZIPPED = html_page("Zipped", text="sent gzip-encoded, stored decoded " * 20)
MISSING = html_page("Gone away")


def cookies(ex: Exchange) -> None:
    """A page with two Set-Cookie headers (the archive keeps both, in order)."""
    body = html_page("Cookies", text="two cookies")
    ex.handler.send_response(200)
    for name, value in (("Content-Type", "text/html; charset=utf-8"), ("Set-Cookie", "a=1"),
                        ("Set-Cookie", "b=2"), ("X-Served-By", "hostile"), ("Content-Length", str(len(body)))):
        ex.handler.send_header(name, value)
    ex.handler.end_headers()
    ex.write(body)


def archive_site(site: HostileSite) -> dict[str, bytes]:
    """Set up the site's pages; the body each URL's response has (decoded), by URL."""
    site.static["/plain"] = Reply(200, PLAIN, {"ETag": '"p1"'})
    site.static["/zipped"] = Reply(200, gzip.compress(ZIPPED), {"Content-Encoding": "gzip"})
    site.static["/missing"] = Reply(404, MISSING)
    site.static["/data.bin"] = Reply(200, b"\0\1\2" * 100, {"Content-Type": "application/octet-stream"})
    site.routes["/cookies"] = cookies
    return {site.url("/plain"): PLAIN, site.url("/zipped"): ZIPPED, site.url("/missing"): MISSING,
            site.url("/data.bin"): b"",  # a type the crawl does not read: its body is never read
            site.url("/cookies"): html_page("Cookies", text="two cookies")}


def dead_url() -> str:
    return f"http://127.0.0.1:{dead_port()}/nobody-home"


def register(store: CrawlStore, crawl_id: str, *seeds: str) -> None:
    bus = InMemoryBus()
    bus.ensure_topics()
    Frontier(store, bus).register(crawl_request(crawl_id, *seeds))


def fetch_and_land(store: CrawlStore, crawl_id: str, batch_id: str, urls: list[str],
                   shard: str = "s0") -> ShardResult:
    """Fetch ``urls`` in one shard with the archive on and land them, as a batch run's steps do."""
    requests = [FetchRequest(u) for u in urls]
    fetcher = loopback_fetcher(max_host_delay_s=0.0, retry=RetryPolicy(max_attempts=2, backoff_s=0.01))
    try:
        result = ShardFetcher(fetcher, "lxml", store.archive).fetch(requests, [], batch_id, shard)
    finally:
        fetcher.close()
    prepared = PreparedBatch(batch_id, [FrontierURL(crawl_id, u, 0) for u in urls], requests, [],
                             BatchReport(batch_id))
    BatchLander(store, lambda _batch: False).land(prepared, [result])
    return result


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``crawl-platform ARGS`` in a subprocess with the test's settings; output as bytes."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([sys.executable, "-m", "crawl_platform.cli.main", *args],
                          env={**base, **settings.to_env()}, cwd=settings.lake_path.parent,
                          capture_output=True, timeout=120, check=False)


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    """The single stderr line of a refused command (asserting there is exactly one)."""
    lines = [line for line in done.stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]
