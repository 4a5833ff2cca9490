"""What one platform costs the machine: idle, and crawling the demo site (see docs/benchmarks.md).

Starts the platform as the end-to-end tests do (the embedded broker, a code server and the Dagster
daemon, instance storage in a new database on the machine's PostgreSQL, four frontier partitions),
then prints:

- idle: CPU of the platform's processes over ``--idle-s`` seconds with nothing to crawl, the lake
  created first as ``crawl-platform up`` does (without it the sensors' idle reads of it would be
  left out);
- crawl: wall seconds, CPU seconds of the platform's Dagster processes and runs (found by their
  ``DAGSTER_HOME``; the broker and the CLI are not counted) and of the whole machine
  (``/proc/stat``, which counts every process, other users' too) while ``crawl-platform crawl …
  --wait`` takes a demo site of ``--pages`` pages with no per-host delay. A five-page crawl first
  warms the platform (the run launcher's fork server starts with the first run).

Run it on a quiet machine: the crawl figure counts every process on it.

    .venv/bin/python benchmarks/platform_cost.py --pages 300

``--stock PART,…`` runs the same with some of the platform's Dagster parts left out, to measure
what each buys (docs/dagster.md, "What the custom instance parts add"): ``launcher`` (Dagster's
DefaultRunLauncher instead of the fork launcher), ``coordinator`` (its queued run coordinator
as it comes, a pass every 5 s), ``storage`` (its own instance storage), ``sensor-loop`` (its 5 s
sensor loop, as ``CRAWL_SENSOR_LOOP_S=5``), or ``all``: Dagster as it comes, ``dagster-daemon
run`` on workspace.yaml with the code server it starts. ``--sqlite`` keeps the instance in SQLite
files in DAGSTER_HOME, as ``crawl-platform up`` does, instead of PostgreSQL.

    .venv/bin/python benchmarks/platform_cost.py --sqlite --pages 2000 --idle-s 30 --stock all

It also prints how many batch runs the crawl took, per minute and in CPU seconds each. With small
batches and one batch per run (``--batch-size 10 --continue-s 0``) nearly every page is a run's
worth of overhead, which gives the Dagster runs a minute the platform sustains and what a run
costs beyond its pages (the internet-scale model in docs/scale.md uses both).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dagster import DagsterInstance, RunsFilter
from measure import machine_cpu_s

from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.config import Settings
from crawl_platform_dagster.instance import CUSTOM_PARTS, write_instance_yaml
from crawl_platform_dagster.processes import DagsterProcesses
from crawl_platform_dagster.stack import create_instance_storage, create_lake
from tests.conftest import fresh_postgres_database

TICK = os.sysconf("SC_CLK_TCK")
PARTS = (*CUSTOM_PARTS, "sensor-loop")
STOCK_SENSOR_LOOP_S = 5  # Dagster's own sensor loop


def platform_cpu_s(dagster_home: str) -> float:
    """CPU seconds of the live processes of the instance in ``dagster_home`` (found by their
    environment: the daemon, the code servers, the runs), with their children that ended."""
    wanted = f"DAGSTER_HOME={dagster_home}".encode()
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if wanted not in environ.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / TICK


def batch_runs(dagster_home: str) -> int:
    """How many crawl_batch_job runs the instance in ``dagster_home`` holds."""
    with DagsterInstance.from_config(dagster_home) as instance:
        return instance.get_runs_count(RunsFilter(job_name="crawl_batch_job"))


def crawl(env: dict[str, str], url: str, crawl_id: str) -> str:
    done = subprocess.run([sys.executable, "-m", "crawl_platform_dagster.cli", "crawl", url, "--crawl-id", crawl_id,
                           "--wait", "--timeout", "900"], env=env, cwd=REPO, capture_output=True, text=True,
                          check=False)
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else done.stderr.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300, help="pages of the demo site (default 300)")
    parser.add_argument("--idle-s", type=float, default=60.0, help="seconds to measure the idle platform")
    parser.add_argument("--stock", default="", help=f"parts left to Dagster: {', '.join(PARTS)}, or all")
    parser.add_argument("--sqlite", action="store_true", help="instance storage in SQLite files, not PostgreSQL")
    parser.add_argument("--batch-size", type=int, default=100, help="CRAWL_BATCH_SIZE (default 100)")
    parser.add_argument("--continue-s", type=float, default=None,
                        help="CRAWL_RUN_CONTINUE_S (default: the setting's); 0 gives one batch per run")
    args = parser.parse_args()
    stock = set(PARTS) if args.stock == "all" else {p for p in args.stock.split(",") if p}
    if stock - set(PARTS):
        parser.error(f"unknown parts {', '.join(sorted(stock - set(PARTS)))}; the parts are {', '.join(PARTS)}")
    print(f"instance: {'SQLite' if args.sqlite else 'PostgreSQL'}; Dagster's own "
          f"{', '.join(sorted(stock)) if stock else 'nothing'}", flush=True)
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="platform-cost-"))
        pg_url = None if args.sqlite else stack.enter_context(fresh_postgres_database())
        tmp = Path(folder)
        with EmbeddedBroker(port=0, log_path=tmp / "tansu.log") as broker:
            tag = uuid.uuid4().hex[:8]
            settings = Settings(
                kafka_bootstrap_servers=broker.bootstrap_servers, **EMBEDDED_BUS_SETTINGS,
                seeds_topic=f"seeds-{tag}", frontier_topic=f"frontier-{tag}", dead_letter_topic=f"dead-{tag}",
                pages_topic=f"pages-{tag}", control_topic=f"control-{tag}", topic_partitions=4,
                lake_path=tmp / "lake", dagster_home=tmp / "dagster_home", handoff_dir=tmp / "handoff",
                allowed_networks=["127.0.0.0/8"], host_delay_ms=0, batch_size=args.batch_size,
                **({} if args.continue_s is None else {"run_continue_s": args.continue_s}),
                sensor_loop_s=STOCK_SENSOR_LOOP_S if "sensor-loop" in stock else 1.0)
            write_instance_yaml(settings.dagster_home, postgres_url=pg_url, max_concurrent_runs=4, partitions=4,
                                stock=stock & set(CUSTOM_PARTS))
            create_instance_storage(settings.dagster_home)
            env = {**os.environ, **settings.to_env()}
            create_lake(settings)  # as `crawl-platform up` does before Dagster starts: the sensors read it
            dagster = DagsterProcesses(env, tmp / "logs", webserver_port=None, workspace=REPO / "workspace.yaml",
                                       stock=stock == set(PARTS))
            dagster.start()
            try:
                home = env["DAGSTER_HOME"]
                time.sleep(20)  # the daemon's first ticks
                before = platform_cpu_s(home)
                time.sleep(args.idle_s)
                idle = (platform_cpu_s(home) - before) / args.idle_s
                print(f"idle: {idle:.3f} cores (daemon and code servers, {args.idle_s:.0f} s)", flush=True)
                with DemoSite(n_pages=5, seed=3).serve() as warm:
                    crawl(env, warm.base_url + "/", "warm-up")
                time.sleep(5)
                with DemoSite(n_pages=args.pages, seed=11).serve() as server:
                    runs_before = batch_runs(home)
                    cpu, own, wall = machine_cpu_s(), platform_cpu_s(home), time.monotonic()
                    last = crawl(env, server.base_url + "/", "measured")
                    wall, cpu, own = time.monotonic() - wall, machine_cpu_s() - cpu, platform_cpu_s(home) - own
                    runs = batch_runs(home) - runs_before
                print(last)
                print(f"crawl of {args.pages} pages: {wall:.1f} s wall, {own:.1f} CPU s of the platform's Dagster "
                      f"processes and runs ({1000 * own / args.pages:.0f} ms a page), {cpu:.1f} CPU s of the machine "
                      f"({1000 * cpu / args.pages:.0f} ms a page), load {os.getloadavg()[0]:.2f}", flush=True)
                print(f"batch runs: {runs} ({60 * runs / wall:.1f} a minute, {own / max(runs, 1):.2f} CPU s of the "
                      "platform's Dagster processes and runs for each)", flush=True)
            finally:
                dagster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
