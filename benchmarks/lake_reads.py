"""CPU of one small transaction on a lake: what every read and write of the crawl pays before its
own work (see docs/benchmarks.md).

Times, on the embedded lake at ``--lake`` (one that ``compare.py --docs --keep`` left, say), the
best of ``--rounds`` rounds of ``--calls`` calls each, in CPU (process time) per call: a read with
no table, a read of one table, a crawl's status (what ``crawl --wait`` and the progress and stall
sensors read) and an empty write. ``--repo`` runs another checkout's store with this script:

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
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.store.database import CrawlStore

store = CrawlStore.from_settings(Settings(lake_path=args.lake), threads=1)
crawl_ids = [row[0] for row in store.query("SELECT crawl_id FROM crawls ORDER BY registered_at LIMIT 1")]
read_model = FrontierReadModel(store)


def empty_write() -> None:
    with store.write():
        pass


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
                   ("empty write transaction", empty_write)):
    print(f"  {name:45s} {best_ms(call):6.2f}")
