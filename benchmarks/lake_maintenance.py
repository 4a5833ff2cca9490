"""What lake maintenance buys: files, bytes, snapshots and read times before and after it.

Simulates a long crawl of small batches on a fresh embedded lake: each of ``--batches`` batches
lands ``--pages`` pages (``--links`` links each) with ``land_batch``, one snapshot with a few small
Parquet files each; with ``--expand`` every batch also grows the frontier with
``Frontier.expand`` as a batch run does (two more snapshots a batch, and frontier updates whose
deletes are files too, but three to four times slower to land). Then it times four reads (median
of ``--repeat`` runs, through ``CrawlStore.query``, as the platform reads): a point lookup
``SELECT count(*) FROM pages WHERE url = ?``, the question every batch run asks first
(``FrontierReadModel.batch_landed``), the frontier's status query (``FrontierReadModel.status``)
and a scan of ``pages`` that reads every file. It then runs ``maintain_lake`` with the default
retention (compaction only: every snapshot is younger than 7 days), times them again, runs it
with retention 0 (every snapshot but the latest expires) and times them once more. Last, it lands
a few more batches, to compare a batch's landing time before and after maintenance:

    .venv/bin/python benchmarks/lake_maintenance.py --batches 500 --repeat 25

``--read-every K`` also times the reads after every K batches, before any maintenance: how reads
grow with an uncompacted lake (``--batches 100 --pages 1000 --read-every 10``: 10k to 100k pages).
"""

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.maintenance import LakeFiles, maintain_lake, measure_lake
from tests.unit.crawl_rows import fetch_result, land, page_html

SITE = "http://bench.test"
CRAWL = "bench"
TAIL = 20  # batches whose landing time is compared before and after maintenance
TIMED = (("point_ms", 9), ("landed_ms", 10), ("status_ms", 9), ("scan_ms", 8))  # reads, column widths


def page_url(k: int) -> str:
    return f"{SITE}/p{k}"


def crawl(store: CrawlStore, frontier: Frontier, batches: range, pages: int, links: int, expand: bool) -> list[float]:
    """Land each batch of ``batches`` through the engine (and expand it, with ``expand``); the
    seconds each took."""
    taken = []
    for b in batches:
        started = time.monotonic()
        ks = range(b * pages, (b + 1) * pages)
        items = [FrontierURL(CRAWL, page_url(k), b) for k in ks]
        results = [fetch_result(page_url(k), page_html(f"page {k}", *(page_url((b + 1) * pages + (k + j) % pages)
                                                                       for j in range(links)))) for k in ks]
        land(store, f"batch-{b}", items, results)
        if expand:
            frontier.expand(f"batch-{b}")
        taken.append(time.monotonic() - started)
        if len(taken) % 100 == 0:
            print(f"  {len(taken)} batches landed, {sum(taken):.0f}s", flush=True)
    return taken


def timed_ms(run: Callable[[], object], repeat: int) -> float:
    run()  # warm-up: the first read after a write loads the new snapshot's metadata
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def reads(store: CrawlStore, batches: int, pages: int, repeat: int) -> dict[str, float]:
    model = FrontierReadModel(store)
    url = page_url(batches * pages // 2)
    return {
        "point_ms": timed_ms(lambda: store.query("SELECT count(*) FROM pages WHERE url = ?", [url]), repeat),
        "landed_ms": timed_ms(lambda: model.batch_landed(f"batch-{batches // 2}"), repeat),
        "status_ms": timed_ms(lambda: model.status(CRAWL), repeat),
        "scan_ms": timed_ms(lambda: store.query("SELECT sum(content_length), max(fetched_at) FROM pages"), repeat),
    }


def row(label: str, files: LakeFiles, times: dict[str, float]) -> str:
    ms = " ".join(f"{times[name]:>{width}.1f}" for name, width in TIMED)
    return (f"{label:<22} {files.data_files:>7} {files.current_files:>8} {files.bytes / 1e6:>8.2f} "
            f"{files.snapshots:>9} {ms}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=12, help="pages per batch (above DuckLake's 10-row inlining)")
    parser.add_argument("--links", type=int, default=3, help="links per page")
    parser.add_argument("--repeat", type=int, default=15, help="runs per timed read")
    parser.add_argument("--expand", action="store_true", help="grow the frontier after each batch, as a run does")
    parser.add_argument("--read-every", type=int, default=0,
                        help="also time the reads after every this many batches, before any maintenance")
    args = parser.parse_args()

    store = CrawlStore.from_settings(Settings(lake_path=Path(tempfile.mkdtemp(prefix="lake-maint-")) / "lake"))
    store.ensure_schema()
    bus = InMemoryBus()
    bus.ensure_topics()
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request([page_url(0)], crawl_id=CRAWL, max_pages=10_000_000,
                                          max_depth=args.batches + TAIL + 1))
    print(f"landing {args.batches} batches of {args.pages} pages into {store.location.data_path}", flush=True)
    heads = " ".join(f"{name.replace('_', ' '):>{width}}" for name, width in TIMED)
    step = args.read_every or args.batches
    taken: list[float] = []
    for start in range(0, args.batches, step):
        done = min(start + step, args.batches)
        taken += crawl(store, frontier, range(start, done), args.pages, args.links, args.expand)
        if args.read_every:
            if start == 0:
                print(f"{'':<22} {'files':>7} {'current':>8} {'MB':>8} {'snapshots':>9} {heads}", flush=True)
            print(row(f"{done * args.pages:,} pages", measure_lake(store), reads(store, done, args.pages, args.repeat)),
                  flush=True)
    rows_before = store.query("SELECT count(*) FROM pages")[0][0]
    first, last = statistics.median(taken[:TAIL]) * 1000, statistics.median(taken[-TAIL:]) * 1000
    print(f"landed {rows_before} pages in {sum(taken):.0f}s; a batch took {first:.0f} ms at first "
          f"and {last:.0f} ms at the end (medians of {TAIL})\n")

    print(f"{'':<22} {'files':>7} {'current':>8} {'MB':>8} {'snapshots':>9} {heads}", flush=True)
    print(row("before", measure_lake(store), reads(store, args.batches, args.pages, args.repeat)), flush=True)
    compacted = maintain_lake(store, timedelta(days=Settings().lake_retention_days), reader_grace=timedelta(0))
    print(row("after, 7-day retention", compacted.after, reads(store, args.batches, args.pages, args.repeat)),
          flush=True)
    expired = maintain_lake(store, timedelta(0), reader_grace=timedelta(0))
    print(row("after, retention 0", expired.after, reads(store, args.batches, args.pages, args.repeat)), flush=True)
    assert store.query("SELECT count(*) FROM pages")[0][0] == rows_before
    after = crawl(store, frontier, range(args.batches, args.batches + TAIL), args.pages, args.links, args.expand)

    for label, report in (("7-day retention", compacted), ("retention 0", expired)):
        print(f"maintenance, {label}: {report.seconds:.1f}s, {report.files_merged} files merged, "
              f"{report.rows_flushed} inlined rows flushed, {report.snapshots_expired} snapshots expired, "
              f"{report.files_removed} files removed")
    print(f"landing a batch: {statistics.median(taken[-TAIL:]) * 1000:.0f} ms before maintenance, "
          f"{statistics.median(after) * 1000:.0f} ms after (medians of {TAIL})")


if __name__ == "__main__":
    main()
