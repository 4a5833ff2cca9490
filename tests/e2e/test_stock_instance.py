"""The crawl on Dagster as it comes: the definitions loaded from workspace.yaml by the stock
``dagster-daemon run`` (which starts its own code server), Dagster's default run launcher, run
coordinator and SQLite storage in DAGSTER_HOME, the sensor loop Dagster's own. Only stock settings
are in dagster.yaml: the one-run-per-partition tag limits, the writer pool, run monitoring and
retries. A data engineer who loads the definitions into their own Dagster deployment gets this;
the platform's instance parts make it faster (docs/dagster.md), not correct."""

import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from dagster import DagsterInstance, DagsterRunStatus, DefaultRunLauncher, QueuedRunCoordinator, RunsFilter

from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.launcher import PID_TAG
from tests.e2e.conftest import Sites, assert_landed_exactly_once, cli

pytestmark = pytest.mark.e2e(seconds=110)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stock_platform(start_platform):
    return start_platform(stock_instance=True, with_processes=True, host_delay_ms=0, batch_size=40)


@pytest.mark.timeout(900)
def test_a_stock_dagster_instance_crawls_every_page_exactly_once(stock_platform):
    settings, env, dagster = stock_platform
    with DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        assert type(instance.run_launcher) is DefaultRunLauncher
        assert type(instance.run_coordinator) is QueuedRunCoordinator
        assert type(instance.run_storage).__module__.startswith("dagster.")
    # Dagster's own daemon command (a script: the interpreter comes first) on the repository's workspace.
    argv = Path(f"/proc/{dagster.processes['daemon'].pid}/cmdline").read_bytes().decode().split("\0")
    script = next(i for i, arg in enumerate(argv) if Path(arg).name == "dagster-daemon")
    assert argv[script + 1:script + 4] == ["run", "-w", str(REPO / "workspace.yaml")]

    with Sites(total_pages=240, hosts=3, seed=41) as sites:
        done = cli(env, "crawl", *sites.seeds, "--crawl-id", "stock", "--wait", "--timeout", "600", timeout=700)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "crawl stock: done, pending 0" in done.stdout
        store = CrawlStore.from_settings(settings)
        assert_landed_exactly_once(store, "stock", sites.expected_urls())
        # Fetched once, too: each page was requested once, plus once per redirect that leads to it.
        redirects = Counter(urlsplit(final).netloc + urlsplit(final).path for url, final in store.query(
            "SELECT url, final_url FROM pages WHERE crawl_id = 'stock' AND final_url <> url"))
        for server in sites.servers:
            host = urlsplit(server.base_url).netloc
            counts = Counter(r.path for r in server.requests if r.path != "/robots.txt")
            assert {path: n for path, n in counts.items() if n != 1 + redirects[host + path]} == {}

    with DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        # The crawl is done once its last batch's frontier step commits; that run then reports its
        # materialisation and ends, so it may still be STARTED for a moment.
        deadline = time.monotonic() + 120
        while True:
            runs = instance.get_runs(RunsFilter(job_name="crawl_batch_job"))
            if all(run.is_finished for run in runs) or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert runs
        assert {run.status for run in runs} == {DagsterRunStatus.SUCCESS}
        assert [run.run_id for run in runs if PID_TAG in run.tags] == []  # none forked by the platform's launcher
