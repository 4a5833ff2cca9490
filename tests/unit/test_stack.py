"""Stopping the embedded stack leaves none of its Dagster processes behind (crawl_platform_dagster.stack)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from crawl_platform_dagster.stack import DagsterProcesses, instance_processes

# A stand-in for a run worker: Dagster starts them as `python -c "from multiprocessing.spawn ..."`.
SLEEPER = "import time  # from multiprocessing.spawn import spawn_main\ntime.sleep(60)"


def _sleeper(home: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SLEEPER], env={**os.environ, "DAGSTER_HOME": home},
                            start_new_session=True)


def test_stop_kills_the_instances_orphaned_dagster_processes_and_no_others(tmp_path):
    mine, other = str(tmp_path / "home"), str(tmp_path / "other-home")
    orphan, bystander = _sleeper(mine), _sleeper(other)
    try:
        deadline = time.monotonic() + 10
        while orphan.pid not in instance_processes(mine) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert instance_processes(mine) == [orphan.pid]
        DagsterProcesses({"DAGSTER_HOME": mine}, tmp_path / "logs").stop()
        assert orphan.wait(10) == -9
        assert bystander.poll() is None
    finally:
        for proc in (orphan, bystander):
            proc.kill()
            proc.wait()
