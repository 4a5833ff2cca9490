"""The forking run launcher: a run executes in a fork of the warm fork server, its process is
recorded on the run, a run whose process died is reported failed, and termination cancels it."""

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.definitions.reconstruct import ReconstructableJob
from dagster._core.launcher import WorkerStatus

from crawl_platform_dagster.launcher import HOST_TAG, PID_TAG, ForkRunLauncher, process_alive
from tests.dagster import forked_jobs

LAUNCHER_YAML = """run_launcher:
  module: crawl_platform_dagster.launcher
  class: ForkRunLauncher
  config:
    preload_modules: [tests.dagster.forked_jobs]
"""


@pytest.fixture
def home_instance(tmp_path) -> Iterator[DagsterInstance]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LAUNCHER_YAML)
    with DagsterInstance.from_config(str(home)) as instance:
        yield instance


def launch(instance: DagsterInstance, folder: Path, sleep_s: float = 0.0) -> str:
    recon = ReconstructableJob.for_module(forked_jobs.__name__, "mark_job")
    run = instance.create_run_for_job(
        forked_jobs.mark_job, job_code_origin=recon.get_python_origin(),
        run_config={"ops": {"write_pid": {"config": {"folder": str(folder), "sleep_s": sleep_s}}}})
    instance.launch_run(run.run_id, workspace=None)  # type: ignore[arg-type]
    return run.run_id


def wait_for(instance: DagsterInstance, run_id: str, statuses: set[DagsterRunStatus], timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        run = instance.get_run_by_id(run_id)
        assert run is not None
        if run.status in statuses:
            return run
        assert time.monotonic() < deadline, f"run still {run.status}"
        time.sleep(0.1)


def test_a_run_executes_in_a_fork_of_the_warm_server_and_its_process_is_recorded(home_instance, tmp_path):
    assert isinstance(home_instance.run_launcher, ForkRunLauncher)
    run_id = launch(home_instance, tmp_path)
    run = wait_for(home_instance, run_id, {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE})
    assert run.status == DagsterRunStatus.SUCCESS
    pid, parent = (int(x) for x in (tmp_path / "pid").read_text().split())
    assert run.tags[PID_TAG] == str(pid)
    assert HOST_TAG in run.tags
    assert pid != os.getpid()
    assert parent != os.getpid()  # forked by the fork server, not by the launching process
    logs = [e.message for e in home_instance.all_logs(run_id)]
    assert any("wrote the pid" in m for m in logs)
    assert any("Forked process" in m for m in logs)


def test_a_run_whose_process_died_is_reported_failed(home_instance, tmp_path):
    run_id = launch(home_instance, tmp_path, sleep_s=60)
    run = wait_for(home_instance, run_id, {DagsterRunStatus.STARTED})
    while not (tmp_path / "pid").exists():
        time.sleep(0.05)
    launcher = home_instance.run_launcher
    assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    pid = int(run.tags[PID_TAG])
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while process_alive(pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    health = launcher.check_run_worker_health(run)
    assert health.status == WorkerStatus.FAILED
    assert f"process {pid} is gone" in (health.msg or "")


def test_terminate_cancels_the_run(home_instance, tmp_path):
    run_id = launch(home_instance, tmp_path, sleep_s=60)
    wait_for(home_instance, run_id, {DagsterRunStatus.STARTED})
    while not (tmp_path / "pid").exists():
        time.sleep(0.05)
    assert home_instance.run_launcher.terminate(run_id)
    run = wait_for(home_instance, run_id, {DagsterRunStatus.CANCELED, DagsterRunStatus.FAILURE}, timeout=30)
    assert run.status == DagsterRunStatus.CANCELED
    assert not home_instance.run_launcher.terminate(run_id)  # a finished run has nothing to stop
