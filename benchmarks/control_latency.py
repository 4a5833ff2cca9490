"""How long a crawl goes on fetching after ``crawl-platform pause`` and ``cancel``, through Dagster.

Starts the platform as the end-to-end tests do (the embedded broker, a code server and the Dagster
daemon, instance storage in a new database on the machine's PostgreSQL), serves a demo site on
loopback, and for each round crawls it at the default politeness (``--host-delay-ms``, 250 ms a
request): once ``--after`` pages have been requested, ``crawl-platform pause``; then, once no
request has come for ``--quiet-s`` seconds, ``resume``, and after ``--after`` more pages
``cancel``. Prints, for each command, the seconds from the command to the last page request the
site answered for the crawl after it (0 when none came), read from the site's own request log.

    .venv/bin/python benchmarks/control_latency.py --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker
from crawl_platform.cli.demo_site import DemoSite, SiteServer
from crawl_platform.config import Settings
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.stack import DagsterProcesses, create_instance_storage, create_lake
from tests.conftest import fresh_postgres_database


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crawl_platform_dagster.cli", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=300)


def page_requests(server: SiteServer) -> list[float]:
    return [r.started_at for r in server.requests if r.path != "/robots.txt"]


def wait_for_pages(server: SiteServer, count: int, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(page_requests(server)) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the crawl did not reach {count} page requests in {timeout_s:.0f} s")
        time.sleep(0.1)


def command_latency(env: dict[str, str], server: SiteServer, action: str, crawl_id: str, quiet_s: float,
                    timeout_s: float = 600.0) -> float:
    """Seconds from ``crawl-platform ACTION`` to the last page request after it; waits until the
    site has had no request for ``quiet_s``."""
    issued = time.monotonic()
    done = cli(env, action, crawl_id)
    if done.returncode != 0:
        raise SystemExit(f"{action} failed: {done.stderr.strip()}")
    deadline = issued + timeout_s
    while True:
        last = max(page_requests(server), default=issued)
        if time.monotonic() - max(last, issued) >= quiet_s:
            return max(0.0, last - issued)
        if time.monotonic() > deadline:
            raise SystemExit(f"the crawl still fetched {timeout_s:.0f} s after {action}")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="crawls, each paused, resumed and cancelled (3)")
    parser.add_argument("--pages", type=int, default=3000, help="pages of the demo site (3000)")
    parser.add_argument("--host-delay-ms", type=int, default=250, help="CRAWL_HOST_DELAY_MS (250, the default)")
    parser.add_argument("--after", type=int, default=40, help="page requests before each command (40)")
    parser.add_argument("--quiet-s", type=float, default=20.0,
                        help="seconds without a request after which a command counts as taken effect (20)")
    args = parser.parse_args()
    latencies: dict[str, list[float]] = {"pause": [], "cancel": []}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="control-latency-")))
        pg_url = stack.enter_context(fresh_postgres_database())
        broker = stack.enter_context(EmbeddedBroker(port=0, log_path=tmp / "tansu.log"))
        tag = uuid.uuid4().hex[:8]
        settings = Settings(
            kafka_bootstrap_servers=broker.bootstrap_servers, **EMBEDDED_BUS_SETTINGS,
            seeds_topic=f"seeds-{tag}", frontier_topic=f"frontier-{tag}", dead_letter_topic=f"dead-{tag}",
            pages_topic=f"pages-{tag}", control_topic=f"control-{tag}", topic_partitions=4,
            lake_path=tmp / "lake", dagster_home=tmp / "dagster_home", handoff_dir=tmp / "handoff",
            allowed_networks=["127.0.0.0/8"], host_delay_ms=args.host_delay_ms)
        write_instance_yaml(settings.dagster_home, postgres_url=pg_url, max_concurrent_runs=4, partitions=4)
        create_instance_storage(settings.dagster_home)
        env = {**os.environ, **settings.to_env()}
        create_lake(settings)
        dagster = DagsterProcesses(env, tmp / "logs", webserver_port=None, workspace=REPO / "workspace.yaml")
        dagster.start()
        stack.callback(dagster.stop)
        print(f"platform up; {args.rounds} round(s) on a {args.pages}-page site at {args.host_delay_ms} ms a "
              f"request, commands after {args.after} page requests", flush=True)
        for round_ in range(1, args.rounds + 1):
            with DemoSite(n_pages=args.pages, seed=round_).serve() as server:
                crawl_id = f"ctl-{round_}"
                started = cli(env, "crawl", server.base_url + "/", "--crawl-id", crawl_id)
                if started.returncode != 0:
                    raise SystemExit(f"crawl failed: {started.stderr.strip()}")
                wait_for_pages(server, args.after)
                pause = command_latency(env, server, "pause", crawl_id, args.quiet_s)
                seen = len(page_requests(server))
                resumed = cli(env, "resume", crawl_id)
                if resumed.returncode != 0:
                    raise SystemExit(f"resume failed: {resumed.stderr.strip()}")
                wait_for_pages(server, seen + args.after)
                cancel = command_latency(env, server, "cancel", crawl_id, args.quiet_s)
            latencies["pause"].append(pause)
            latencies["cancel"].append(cancel)
            print(f"round {round_}: last request {pause:.1f} s after pause, {cancel:.1f} s after cancel "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
    for action, values in latencies.items():
        print(f"{action}: median {statistics.median(values):.1f} s, max {max(values):.1f} s over {len(values)} "
              "command(s), to the last request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
