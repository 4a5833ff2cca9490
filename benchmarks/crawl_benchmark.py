"""End-to-end crawl benchmark: pages/s of a generated site crawled through the whole platform.

Modes:
  dagster  the real loop as a user runs it: CLI -> seeds topic -> Dagster daemon sensors -> batch
           runs (one process each) -> DuckDB -> frontier topic, on the embedded broker.
  engine   the same engine objects driven by a plain loop in this process (no Dagster), which
           shows how much of the time is orchestration.

Prints pages, wall seconds, pages/s, seconds from seed submission to the first row in `pages`,
and the per-stage split reported by the batches. Loopback only; stops by itself.

    .venv/bin/python benchmarks/crawl_benchmark.py --pages 300 --mode dagster
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from crawl_platform.bus.broker import (
    EMBEDDED_BUS_SETTINGS,
    EmbeddedBroker,
)
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.config import Settings
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.coordinator import CrawlCoordinator
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.loop import CrawlLoop
from crawl_platform.pipeline.planning import LoopPolicy
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.processes import DagsterProcesses


def first_row_after(store: CrawlStore, started: float, timeout: float = 300.0) -> float:
    while time.monotonic() - started < timeout:
        if store.exists() and store.query("SELECT count(*) FROM pages")[0][0]:
            return time.monotonic() - started
        time.sleep(0.1)
    return float("nan")


def run_engine(settings: Settings, seeds: list[str]) -> None:
    """The engine's crawl loop in this process, one batch over every partition at a time (one
    partition group): all hosts are fetched side by side."""
    bus = KafkaBus.from_settings(settings)
    bus.ensure_topics()
    submit_crawl(bus, build_crawl_request(seeds, crawl_id="bench", max_pages=10**7, max_depth=100))
    crawler = BatchCrawler.from_settings(settings)
    coordinator = CrawlCoordinator.from_settings(settings, crawler.bus, crawler.store, continuing=False,
                                                 sweep_every_s=0.0)
    coordinator.policy = LoopPolicy(settings.partition_batch_size(), max_runs_per_tick=1000, batch_groups=1)
    CrawlLoop(crawler, SeedIntake.from_settings(settings), coordinator).run_until_idle(max_turns=100_000)


def main() -> None:
    # SIGTERM becomes SystemExit, so the daemon and servers started below are stopped too.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--mode", choices=["dagster", "engine"], default="dagster")
    parser.add_argument("--batch-size", type=int, default=Settings().batch_size,
                        help="CRAWL_BATCH_SIZE (messages per partition per run)")
    parser.add_argument("--host-delay-ms", type=int, default=0)
    parser.add_argument("--max-concurrent-runs", type=int, default=4)
    parser.add_argument("--hosts", type=int, default=1, help="serve the pages from this many hosts (ports)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="crawl-bench-"))
    sites = [DemoSite(n_pages=max(2, args.pages // args.hosts), seed=1 + i) for i in range(args.hosts)]
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(port=0))
        servers = [stack.enter_context(site.serve()) for site in sites]
        tag = uuid.uuid4().hex[:6]
        settings = Settings(
            kafka_bootstrap_servers=broker.bootstrap_servers, **EMBEDDED_BUS_SETTINGS,
            seeds_topic=f"seeds-{tag}", frontier_topic=f"frontier-{tag}", dead_letter_topic=f"dead-{tag}",
            lake_path=tmp / "lake", dagster_home=tmp / "dagster_home", handoff_dir=tmp / "handoff",
            batch_size=args.batch_size,
            host_delay_ms=args.host_delay_ms, allowed_networks=["127.0.0.0/8"],
        )
        store = CrawlStore.from_settings(settings)
        expected = set().union(*(site.expected_urls(server.base_url)
                                 for site, server in zip(sites, servers, strict=True)))
        seeds = [server.base_url + "/" for server in servers]
        cpu_before = os.times()
        if args.mode == "engine":
            started = time.monotonic()
            run_engine(settings, seeds)
            wall = time.monotonic() - started
            first = float("nan")
        else:
            write_instance_yaml(settings.dagster_home, max_concurrent_runs=args.max_concurrent_runs,
                                partitions=settings.topic_partitions)
            env = {**os.environ, **settings.to_env()}
            dagster = DagsterProcesses(env, tmp / "logs", webserver_port=None, workspace=REPO / "workspace.yaml")
            dagster.start()
            try:
                time.sleep(8)  # daemon warm-up: sensors start ticking
                started = time.monotonic()
                proc = subprocess.Popen([sys.executable, "-m", "crawl_platform.cli.main", "crawl", *seeds,
                                         "--crawl-id", "bench", "--max-pages", str(10**7), "--max-depth", "100",
                                         "--wait", "--timeout", "1800"], env=env, cwd=REPO,
                                        stdout=subprocess.DEVNULL)
                first = first_row_after(store, started)
                proc.wait()
                wall = time.monotonic() - started
            finally:
                dagster.stop()
        cpu_after = os.times()
        landed = store.query("SELECT count(DISTINCT url), count(*) FROM pages")[0]
        stages = store.query("SELECT sum(elapsed_ms) / 1000 FROM pages")[0][0]
        runs = len(list((tmp / "dagster_home" / "storage").glob("*"))) if args.mode == "dagster" else 0
    print(f"mode={args.mode} hosts={args.hosts} pages_expected={len(expected)} pages_landed={landed[0]} "
          f"rows={landed[1]} "
          f"exactly_once={landed[0] == landed[1] == len(expected)}")
    print(f"wall_s={wall:.1f} pages_per_s={landed[0] / wall:.1f} seed_to_first_row_s={first:.1f} "
          f"fetch_time_sum_s={stages:.1f} batch_size={args.batch_size} host_delay_ms={args.host_delay_ms} "
          f"runs={runs} cores={os.cpu_count()}")
    print(f"cpu_s_this_process={cpu_after.user - cpu_before.user + cpu_after.system - cpu_before.system:.1f} "
          f"cpu_s_children={cpu_after.children_user - cpu_before.children_user:.1f}")


if __name__ == "__main__":
    main()
