"""Landings per second one lake sustains with its catalog on PostgreSQL and N writer processes:
the constant behind "catalog commits per second" in the internet-scale model (docs/scale.md).

Creates a lake whose catalog is a new database on the machine's PostgreSQL (``CRAWL_TEST_POSTGRES``
or ``postgresql://postgres@127.0.0.1:5432/postgres``) and whose Parquet files are in a temporary
folder, then starts ``--writers`` processes for each N given. Each registers a crawl of its own
and, for ``--seconds``, lands batches of ``--urls`` fetched HTML pages with ``--links`` links each
(half of them new URLs) as a batch run's landing step does: ``land_batch`` (pages, documents,
links, batch items and hosts in one transaction under the lake-wide write lock), then
``Frontier.expand`` (admit the new links, close the batch). Pages are parsed before the clock
starts. Prints, per N: batches landed, landings (``land_batch`` + ``expand``, two commits each)
per second, pages per second, and the median seconds of one landing and of one wait for the
write lock.

    .venv/bin/python benchmarks/catalog_writers.py --writers 1 2 4 --seconds 30
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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


def _page(url: str, host: str, batch: int, index: int, links: int) -> bytes:
    hrefs = "".join(f'<a href="http://{host}/b{batch + 1}/p{(index * links + k) % 100_000}">l{k}</a>'
                    for k in range(links))
    return f"<html><head><title>{url}</title></head><body><p>text of {url}</p>{hrefs}</body></html>".encode()


def _writer(settings: Settings, index: int, urls: int, links: int, start_at: float, stop_at: float,
            out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    store = CrawlStore.from_settings(settings)
    bus = InMemoryBus()
    bus.ensure_topics()
    frontier = Frontier(store, bus)
    crawl, host = f"w{index}", f"w{index}.bench.example"
    frontier.register(CrawlRequest(crawl, (f"http://{host}/",), 10**9, 1000, "host", time.time()))
    landings: list[float] = []
    batch = 0
    while True:
        pages = [f"http://{host}/b{batch}/p{i}" for i in range(urls)]
        now = datetime.now(UTC).replace(tzinfo=None)
        results = {u: FetchResult(u, u, 200, "text/html", _page(u, host, batch, i, links), None, now, 1.0)
                   for i, u in enumerate(pages)}
        parsed = {u: parse_html(r.body, u, r.content_type) for u, r in results.items()}
        items = [FrontierURL(crawl, u, 1) for u in pages]
        batch_id = f"e0.p{index}-{batch * urls}-{(batch + 1) * urls}"
        time.sleep(max(0.0, start_at - time.time()))
        if time.time() >= stop_at:
            break
        clock = time.perf_counter()
        land_batch(store, batch_id, items, results, parsed)
        frontier.expand(batch_id)
        landings.append(time.perf_counter() - clock)
        batch += 1
    out.put({"index": index, "landings": landings})


def run(settings: Settings, writers: int, seconds: float, urls: int, links: int) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    start_at = time.time() + 15  # every writer has started and parsed its first batch
    stop_at = start_at + seconds
    procs = [context.Process(target=_writer, args=(settings, i, urls, links, start_at, stop_at, out))
             for i in range(writers)]
    for proc in procs:
        proc.start()
    done = [out.get(timeout=seconds + 600) for _ in procs]
    for proc in procs:
        proc.join(60)
    wall = max(time.time(), stop_at) - start_at
    landings = [s for d in done for s in d["landings"]]
    return {"writers": writers, "batches": len(landings), "landings_per_s": len(landings) / wall,
            "pages_per_s": len(landings) * urls / wall,
            "median_landing_s": statistics.median(landings) if landings else float("nan"),
            "p95_landing_s": statistics.quantiles(landings, n=20)[-1] if len(landings) > 1 else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4], help="writer processes, one run each")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each run lands batches (30)")
    parser.add_argument("--urls", type=int, default=500, help="pages per batch (500)")
    parser.add_argument("--links", type=int, default=20, help="links per page (20)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = []
    for writers in args.writers:
        with fresh_postgres_database() as url, tempfile.TemporaryDirectory(prefix="catalog-writers-") as folder:
            settings = Settings(lake_path=Path(folder) / "lake", lake_catalog=lake_catalog(url),
                                lake_data_path=str(Path(folder) / "data"))
            CrawlStore.from_settings(settings).ensure_schema()
            before = loadavg()
            result = run(settings, writers, args.seconds, args.urls, args.links)
            figures.append(result)
            print(f"{writers} writer(s): {result['batches']} batches of {args.urls} pages, "
                  f"{result['landings_per_s']:.2f} landings/s, {result['pages_per_s']:.0f} pages/s, "
                  f"landing median {result['median_landing_s']:.3f} s (p95 {result['p95_landing_s']:.3f} s), "
                  f"load {before} -> {loadavg()}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
