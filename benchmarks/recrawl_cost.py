"""What a recrawl of an unchanged site costs when the server ignores validators: with and without
the parse of bodies the lake already has.

A server that sends no ``ETag`` and ignores ``If-Modified-Since`` answers every recrawl request
with the full page. The batch's reader gives each request the content hash of the URL's latest
version (``FetchRequest.known_hash``), and the fetch step then leaves an identical body unparsed:
it would land no new version (see docs/benchmarks.md).

The site is Debian's Python 3.11 documentation (``python3.11-doc``, 528 pages) served by nginx
with ``etag off`` and ``if_modified_since off``. The script lands every page once (a first crawl),
then recrawls all of them as one batch, ``--rounds`` times, alternating the two ways:

- ``parse all``: requests without a known hash (what the platform did before);
- ``skip unchanged``: requests with it (the platform's way now).

Each recrawl is what a batch run does: the fetch step (one parse worker, the default), the WARC
archive, and the landing transaction, which adds no version either way. It prints each round's
wall time and CPU (this process and its parse worker) and the best of each way.

    .venv/bin/python benchmarks/recrawl_cost.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from docs_site import serve_docs

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import Fetcher, FetchRequest
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.pipeline.shard import ShardFetcher
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.pages import latest_versions


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _pass(store: CrawlStore, urls: list[str], batch_id: str, known: bool) -> tuple[float, float, int, int]:
    """Fetch, archive, parse and land every URL as one batch; (wall s, CPU s, new versions, unchanged)."""
    wall, cpu = time.perf_counter(), _cpu_s()
    with store.read() as con:
        latest = latest_versions(con, urls)
    requests = [FetchRequest(u, etag=(v := latest.get(u)) and v.etag, last_modified=v and v.last_modified,
                             known_hash=v.content_hash if (v and known) else None) for u in urls]
    fetcher = Fetcher("recrawl-cost/1.0", host_delay_s=0.0, allowed_networks=["127.0.0.1/32"])
    shards = ShardFetcher(fetcher, archive=store.archive, parse_workers=1)
    try:
        shard = shards.fetch(requests, [], batch_id)
    finally:
        shards.close()  # the parse worker exits: its CPU counts in RUSAGE_CHILDREN
    items = [FrontierURL("recrawl", u, 0) for u in urls]
    landed = land_batch(store, batch_id, items, shard.results, shard.parsed, shard.hosts, shard.archived,
                        unchanged=shard.unchanged)
    return time.perf_counter() - wall, _cpu_s() - cpu, landed.new_versions, len(shard.unchanged)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="recrawls of each way, alternated (3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recrawl-cost-") as tmp, \
            serve_docs(Path(tmp), validators=False) as site:
        urls = sorted(site.expected)
        store = CrawlStore(LakeLocation.from_settings(Settings(lake_path=Path(tmp) / "lake")), threads=1)
        wall, cpu, new, _ = _pass(store, urls, "first", known=False)
        print(f"first crawl: {len(urls)} pages, {new} versions, {wall:.2f} s, CPU {cpu:.2f} s")
        best: dict[str, tuple[float, float]] = {}
        for k in range(args.rounds):
            for way, known in (("parse all", False), ("skip unchanged", True)):
                wall, cpu, new, unchanged = _pass(store, urls, f"recrawl-{k}-{known}", known)
                print(f"round {k + 1}, {way:14s}: {wall:.2f} s, CPU {cpu:.2f} s ({1000 * cpu / len(urls):.1f} ms "
                      f"a page), {new} new versions, {unchanged} left unparsed")
                best[way] = min(best.get(way, (wall, cpu)), (wall, cpu), key=lambda t: t[1])
        (w0, c0), (w1, c1) = best["parse all"], best["skip unchanged"]
        print(f"best recrawl, parse all: {w0:.2f} s, CPU {c0:.2f} s; skip unchanged: {w1:.2f} s, CPU {c1:.2f} s "
              f"(CPU x{c1 / c0:.2f}, wall x{w1 / w0:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
