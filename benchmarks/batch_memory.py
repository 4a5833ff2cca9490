"""Where the batch process's memory peaks: the engine's crawl loop (`crawl_benchmark.run_engine`,
no Dagster) over the benchmark's static site, with the process's resident and private memory
sampled every 20 ms and each sample given to the batch phase running at the time.

The phases are the batch's parts: reading it from Kafka (``prepare``), fetching and parsing
(``fetch``), landing it in the lake (``land``) and growing the frontier (``expand``). The parse
workers are separate processes and are not counted here. Prints, per phase, the largest RSS and
private (``Private_Clean + Private_Dirty`` of ``/proc/self/smaps_rollup``) seen, and at the end
the embedded broker's RSS and the records of each topic:

    .venv/bin/python benchmarks/batch_memory.py --pages 20000

``--glibc-arenas`` runs it without :mod:`crawl_platform.malloc` (glibc's arenas uncapped, nothing
handed back after a batch), to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from crawl_benchmark import run_engine
from crawlers import platform_settings
from measure import _memory
from static_site import serve_site

from crawl_platform.bus.broker import EmbeddedBroker
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.fetch import fetcher as fetcher_module
from crawl_platform.pipeline import batch
from crawl_platform.store.database import CrawlStore

_phase = ["between"]
_timeline: list[list[Any]] = []  # [phase, RSS at entry, peak RSS, RSS at exit] per phase entered


def _memory_mb() -> tuple[float, float]:
    """(RSS, private) of this process in MB."""
    fields: dict[str, int] = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                fields[name] = int(rest.split()[0])
    return fields["Rss"] / 1024, (fields["Private_Clean"] + fields["Private_Dirty"]) / 1024


def _tagged(phase: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        before, _phase[0] = _phase[0], phase
        entry = [phase, _memory_mb()[0], 0.0, 0.0]
        _timeline.append(entry)
        try:
            return func(*args, **kwargs)
        finally:
            _phase[0] = before
            entry[3] = _memory_mb()[0]
            entry[2] = max(entry[2], entry[3])
    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20000, help="article pages of the site (20000)")
    parser.add_argument("--timeline", action="store_true", help="also print each phase's RSS at entry, peak, exit")
    parser.add_argument("--batch-size", type=int, default=0, help="CRAWL_BATCH_SIZE (0: auto)")
    parser.add_argument("--glibc-arenas", action="store_true",
                        help="leave glibc's malloc arenas uncapped and untrimmed (crawl_platform.malloc off)")
    args = parser.parse_args()
    if args.glibc_arenas:  # the fetcher's and the batch's own calls, made no-ops
        fetcher_module.limit_arenas = lambda arenas=0: False
        batch.release_free_memory = lambda: None
    batch.BatchReader.prepare = _tagged("prepare", batch.BatchReader.prepare)
    batch.ShardFetcher.fetch = _tagged("fetch", batch.ShardFetcher.fetch)
    batch.BatchLander.land = _tagged("land", batch.BatchLander.land)
    batch.expand_batch = _tagged("expand", batch.expand_batch)
    peaks: dict[str, tuple[float, float]] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            rss, private = _memory_mb()
            old = peaks.get(_phase[0], (0.0, 0.0))
            peaks[_phase[0]] = (max(old[0], rss), max(old[1], private))
            if _timeline:
                _timeline[-1][2] = max(_timeline[-1][2], rss)

    workdir = Path(tempfile.mkdtemp(prefix="batch-memory-"))
    with contextlib.ExitStack() as stack:
        site = stack.enter_context(serve_site(args.pages, workdir))
        broker = stack.enter_context(EmbeddedBroker(port=0))
        settings = platform_settings(workdir / "run", broker.bootstrap_servers, args.batch_size, 0)
        threading.Thread(target=sample, daemon=True).start()
        started = time.monotonic()
        run_engine(settings, site.seed_urls)
        done.set()
        wall = time.monotonic() - started
        with CrawlStore.from_settings(settings).read() as con:
            pages = con.execute("SELECT count(DISTINCT url) FROM pages").fetchone()[0]
        bus = KafkaBus.from_settings(settings)
        records = {t: sum(high - low for low, high in bus.log_ends(t).values())
                   for t in (bus.seeds_topic, bus.frontier_topic, bus.pages_topic, bus.dead_letter_topic)}
        broker_mb = _memory(broker._process.pid, pss_too=False)[0] / 2**20 if broker._process else float("nan")
    print(f"{pages} pages in {wall:.1f} s ({pages / wall:.0f} pages/s), batch size {settings.partition_batch_size()}; "
          f"the broker holds {broker_mb:.0f} MB at the end, records per topic {records}")
    print("| phase | peak RSS MB | peak private MB |\n|---|---|---|")
    for phase, (rss, private) in sorted(peaks.items(), key=lambda kv: -kv[1][0]):
        print(f"| {phase} | {rss:.0f} | {private:.0f} |")
    if args.timeline:
        print("\n| phase | RSS at entry MB | peak MB | at exit MB |\n|---|---|---|---|")
        for phase, entry, peak, exit_ in _timeline:
            print(f"| {phase} | {entry:.0f} | {peak:.0f} | {exit_:.0f} |")


if __name__ == "__main__":
    main()
