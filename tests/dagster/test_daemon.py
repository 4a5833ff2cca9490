"""`python -m crawl_platform_dagster.daemon`, the daemon `up` runs: Dagster's own daemon, with the run
launcher's fork server started before any run and the sensors evaluated every second, not every
five."""

import itertools
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from dagster import DagsterInstance

from crawl_platform_dagster.daemon import WARM_MESSAGE
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.processes import instance_processes

SENSOR_FILE = '''
from dagster import Definitions, DefaultSensorStatus, SkipReason, job, op, sensor

@op
def nothing():
    pass

@job
def nothing_job():
    nothing()

@sensor(job=nothing_job, minimum_interval_seconds=1, default_status=DefaultSensorStatus.RUNNING)
def every_second(context):
    return SkipReason("nothing to do")

defs = Definitions(jobs=[nothing_job], sensors=[every_second])
'''
CHECK_LINE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \+0000.*Checking for new runs for sensor: every_second")


def _sensor_checks(log: Path) -> list[datetime]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return [datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") for m in CHECK_LINE.finditer(text)]


def test_the_fork_server_is_warm_before_any_run_and_a_one_second_sensor_is_evaluated_every_second(tmp_path):
    home = tmp_path / "home"
    yaml = write_instance_yaml(home)
    # The launcher of `up`, with a fork server that imports nothing heavy.
    yaml.write_text(yaml.read_text().replace("  class: ForkRunLauncher\n",
                                             "  class: ForkRunLauncher\n  config:\n    preload_modules: [json]\n"))
    (tmp_path / "sensors.py").write_text(SENSOR_FILE)
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(f'load_from:\n  - python_file: "{tmp_path / "sensors.py"}"\n')
    log = tmp_path / "daemon.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRAWL_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home)}  # CRAWL_SENSOR_LOOP_S at its default, 1 s
    with log.open("wb") as out:
        daemon = subprocess.Popen([sys.executable, "-m", "crawl_platform_dagster.daemon", "run", "-w", str(workspace)],
                                  env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        fork_servers: list[int] = []
        while time.monotonic() < deadline and daemon.poll() is None:
            fork_servers = fork_servers or instance_processes(str(home), (b"multiprocessing.forkserver",))
            checks = _sensor_checks(log)
            if fork_servers and len(checks) >= 6 and WARM_MESSAGE in log.read_text(errors="replace"):
                break
            time.sleep(0.5)
        assert daemon.poll() is None, log.read_text(errors="replace")
        assert fork_servers, "no fork server of the daemon's instance"
        # It forked one process to know when it was warm (`up` waits for this line), and no run.
        assert WARM_MESSAGE in log.read_text(errors="replace")
        with DagsterInstance.from_config(str(home)) as instance:
            assert instance.get_runs_count() == 0  # started before any run asked for it
        gaps = sorted((b - a).total_seconds() for a, b in itertools.pairwise(checks))
        # Dagster's own loop passes every 5 s; at 1 s, with a one-second resolution in the log and
        # a busy machine, most gaps are 1-2 s.
        assert gaps[len(gaps) // 2] <= 2, gaps
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(30)
