"""kill -9 of a run worker in the middle of a batch, and of the Dagster daemon: after the daemon
is started again, run monitoring finds the orphaned run's process gone and fails the run, run
retries execute the batch again, and the crawl completes with every page landed exactly once."""

import os
import signal
import subprocess
import time

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.launcher import PID_TAG
from crawl_platform_dagster.processes import DagsterProcesses
from tests.e2e.conftest import CRAWL_PLATFORM, REPO, Sites, assert_landed_exactly_once

pytestmark = pytest.mark.e2e(seconds=230)


def _run_workers(instance: DagsterInstance) -> list[int]:
    """PIDs of the processes of the instance's started runs, which the run launcher records."""
    runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
    return [int(run.tags[PID_TAG]) for run in runs if PID_TAG in run.tags]


def test_killed_run_worker_and_daemon_cost_time_not_pages(start_platform, tmp_path):
    settings, env, dagster = start_platform(with_processes=True, host_delay_ms=10, batch_size=150,
                                            run_timeout_s=30)
    store = CrawlStore.from_settings(settings)
    with Sites(total_pages=1000, hosts=4, seed=13) as sites:
        waiter = subprocess.Popen([*CRAWL_PLATFORM, "crawl", *sites.seeds,
                                   "--crawl-id", "killed", "--wait", "--timeout", "500"],
                                  env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        victims: list[int] = []
        with DagsterInstance.from_config(str(settings.dagster_home)) as instance:
            while time.monotonic() < deadline and not victims:
                landed = store.query("SELECT count(*) FROM pages")[0][0] if store.exists() else 0
                if landed:  # a later batch is fetching now: kill its worker mid-batch
                    victims = _run_workers(instance)
                time.sleep(0.2)
        assert victims, "no run worker was caught running"
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        os.kill(dagster.processes["daemon"].pid, signal.SIGKILL)
        dagster.processes["daemon"].wait()
        time.sleep(2)
        restarted = DagsterProcesses(env, tmp_path / "logs", webserver_port=None,
                                     workspace=REPO / "workspace.yaml").start()
        try:
            out, _ = waiter.communicate(timeout=520)
            assert waiter.returncode == 0, out
        finally:
            restarted.stop()
        expected = sites.expected_urls()
        assert len(expected) >= 1000
        assert_landed_exactly_once(store, "killed", expected)
