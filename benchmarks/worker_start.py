"""CPU of a parse worker's start: a new interpreter that imports the parser and parses one page.

Starts ``--starts`` single-worker pools (:class:`crawl_platform.parse.pool.ParseWorkers`) one
after another, each until its worker is ready, and prints the workers' CPU per start (user and
system, from ``RUSAGE_CHILDREN``). A Dagster batch run starts one for each run (see
docs/benchmarks.md). The workers start with ``OPENBLAS_NUM_THREADS=1`` unless the environment sets
it:

    .venv/bin/python benchmarks/worker_start.py --starts 5
    OPENBLAS_NUM_THREADS=2 .venv/bin/python benchmarks/worker_start.py --starts 5   # OpenBLAS with a thread per core
"""

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawl_platform.parse.pool import ParseWorkers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5, help="worker starts to average (5)")
    args = parser.parse_args()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(args.starts):
        workers = ParseWorkers(1)
        deadline = time.monotonic() + 60
        while not workers.ready and time.monotonic() < deadline:
            time.sleep(0.005)
        if not workers.ready:
            sys.exit("worker_start.py: a worker did not start within 60 s")
        workers.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = (after.ru_utime - before.ru_utime) / args.starts
    system = (after.ru_stime - before.ru_stime) / args.starts
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "unset: 1 in the workers")
    print(f"parse worker start, mean of {args.starts}: {user + system:.3f} CPU s "
          f"(user {user:.3f}, system {system:.3f}); OPENBLAS_NUM_THREADS {blas}")


if __name__ == "__main__":
    main()
