"""CPU of one small transaction on a lake: what every read and write of the crawl pays before its
own work (see docs/benchmarks.md).

Times, on the embedded lake at ``--lake`` (one that ``compare.py --docs --keep`` left, say), the
best of ``--rounds`` rounds of ``--calls`` calls each, in CPU (process time) per call: a read with
no table, a read of one table, a crawl's status (what ``crawl --wait`` and the progress and stall
sensors read), an empty write, and two reads whose cost could grow with the lake: the link targets
of its largest batch (what admission reads after a batch lands) and the latest versions of 5,000 of
its pages (what a batch's reader and every landing look up), also from only the ``pages`` rows
the last 20 snapshots inserted (``ducklake_table_insertions``). ``--repo`` runs another checkout's
store with this script:

    .venv/bin/python benchmarks/compare.py --docs --mode dagster --scrapy-concurrency --keep
    .venv/bin/python benchmarks/lake_reads.py --lake /tmp/crawl-compare-XXXX/platform-dagster/lake
    git worktree add /tmp/before HEAD~1 && .venv/bin/python benchmarks/lake_reads.py --lake … --repo /tmp/before
"""

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--lake", type=Path, required=True, help="an embedded lake's folder (catalog.sqlite, data/)")
parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the checkout whose crawl_platform is measured (this one)")
parser.add_argument("--calls", type=int, default=100)
parser.add_argument("--rounds", type=int, default=5)
args = parser.parse_args()
if not (args.lake / "catalog.sqlite").exists():
    sys.exit(f"lake_reads.py: no embedded lake at {args.lake} (no catalog.sqlite)")
sys.path.insert(0, str(args.repo))

from crawl_platform.config import Settings
from crawl_platform.frontier.admission import LINK_OUTCOMES
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.frontier import link_targets
from crawl_platform.store.pages import latest_versions

store = CrawlStore.from_settings(Settings(lake_path=args.lake), threads=1)
crawl_ids = [row[0] for row in store.query("SELECT crawl_id FROM crawls ORDER BY registered_at LIMIT 1")]
read_model = FrontierReadModel(store)
largest_batch = store.query(
    "SELECT batch_id FROM batch_items GROUP BY batch_id ORDER BY count(*) DESC, batch_id LIMIT 1")
some_urls = [row[0] for row in store.query("SELECT url FROM pages USING SAMPLE reservoir(5000 ROWS) REPEATABLE (42)")]


def empty_write() -> None:
    with store.write():
        pass


def batch_link_targets() -> None:
    with store.read() as con:
        link_targets(con, largest_batch[0][0], LINK_OUTCOMES)


def pages_latest() -> None:
    with store.read() as con:
        latest_versions(con, some_urls)


def pages_latest_recent() -> None:
    with store.read() as con:
        latest = con.execute(f"SELECT id FROM {store.alias}.current_snapshot()").fetchone()[0]  # type: ignore[index]
        con.execute(
            f"""SELECT url, max(version), arg_max(content_hash, version)
                FROM ducklake_table_insertions('{store.alias}', 'main', 'pages', $2::BIGINT, $3::BIGINT)
                WHERE url IN (SELECT unnest($1)) GROUP BY url""", [some_urls, max(0, latest - 20), latest]).fetchall()


def best_ms(call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(args.rounds):
        started = time.process_time()
        for _ in range(args.calls):
            call()
        best = min(best, (time.process_time() - started) / args.calls)
    return best * 1000


print(f"{args.repo} on {args.lake}, best of {args.rounds} rounds of {args.calls} calls, CPU ms a call")
for name, call in (("read, no table (SELECT 1)", lambda: store.query("SELECT 1")),
                   ("read of one table (count(*) FROM crawls)", lambda: store.query("SELECT count(*) FROM crawls")),
                   (f"status of crawl {crawl_ids[0] if crawl_ids else None}",
                    lambda: read_model.status(crawl_ids[0] if crawl_ids else None)),
                   ("empty write transaction", empty_write),
                   *([(f"link targets of batch {largest_batch[0][0]}", batch_link_targets)] if largest_batch else []),
                   (f"latest versions of {len(some_urls):,} pages", pages_latest),
                   ("the same, in the last 20 snapshots' rows", pages_latest_recent)):
    print(f"  {name:45s} {best_ms(call):6.2f}")
