"""One fetch step on one host with no delay, parsed in the step (0 workers) or beside the fetch.

The generated one-host site of `compare.py` (nginx on loopback) is fetched and parsed by one
`ShardFetcher`, as a batch run's fetch step does (`CRAWL_PARSE_WORKERS` = `--workers`), several
times per worker count, alternating. Prints wall seconds, pages/s and the CPU of the step's process
and its parse workers per page (nginx excluded), the best of the repeats:

    .venv/bin/python benchmarks/parse_workers.py --pages 5000 --workers 0 1 2 --repeats 3

``--docs`` fetches the Python 3.11 documentation instead (530 pages, some of them huge index
pages), and ``--warm`` lends the step workers that have started already, as a Dagster run's plan
step does for its fetch step and the levels after it.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from docs_site import serve_docs
from static_site import serve_site

from crawl_platform.fetch.fetcher import Fetcher, FetchRequest
from crawl_platform.parse.pool import ParseWorkers
from crawl_platform.pipeline.shard import ShardFetcher


def one_step(urls: list[str], workers: int, warm: bool) -> tuple[float, float, int]:
    fetcher = Fetcher("crawl-platform-bench/1.0", allowed_networks=["127.0.0.0/8"], host_delay_s=0.0,
                      obey_robots=False)
    lent = ParseWorkers(workers) if warm and workers else None
    if lent is not None:
        time.sleep(2.0)  # every worker has imported the parser by then
    step = ShardFetcher(fetcher, "lxml", None, parse_workers=workers, workers=lent)
    before, started = os.times(), time.perf_counter()
    result = step.fetch([FetchRequest(url) for url in urls], [])
    wall = time.perf_counter() - started
    step.close()
    if lent is not None:
        lent.close()
    after = os.times()
    # children_* count the parse workers once they have been joined (the pool is shut down in fetch).
    cpu = sum(after[i] - before[i] for i in range(4))
    print(f"  workers={workers} wall={wall:.2f} user={after[0] - before[0]:.2f} sys={after[1] - before[1]:.2f} "
          f"children user={after[2] - before[2]:.2f} sys={after[3] - before[3]:.2f} "
          f"fetch={result.seconds['fetch']:.2f} parse={result.seconds['parse']:.2f}")
    assert not step.fallback, step.fallback
    return wall, cpu, len(result.parsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--docs", action="store_true", help="the Python docs instead of the generated site")
    parser.add_argument("--warm", action="store_true", help="workers started before the step, as in a Dagster run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, (serve_docs(Path(tmp)) if args.docs
                                                 else serve_site(args.pages, Path(tmp))) as site:
        urls = sorted(site.expected)[: args.pages]
        print(f"{len(urls)} URLs of one host ({site.server_kind}), load average {os.getloadavg()[0]:.2f}")
        best: dict[int, tuple[float, float, int]] = {}
        for _ in range(args.repeats):
            for workers in args.workers:
                wall, cpu, parsed = one_step(urls, workers, args.warm)
                if workers not in best or wall < best[workers][0]:
                    best[workers] = (wall, cpu, parsed)
        for workers, (wall, cpu, parsed) in sorted(best.items()):
            print(f"parse_workers={workers} parsed={parsed} wall_s={wall:.2f} pages_per_s={len(urls) / wall:.0f} "
                  f"cpu_s={cpu:.2f} cpu_ms_per_page={cpu * 1000 / len(urls):.2f}")


if __name__ == "__main__":
    main()
