"""The dagster.yaml files the platform writes and ships load in Dagster with the limits it relies on."""

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance, DefaultRunLauncher, QueuedRunCoordinator
from dagster._core.instance.config import dagster_instance_config

from crawl_platform_dagster.instance import CUSTOM_PARTS, write_instance_yaml
from crawl_platform_dagster.stack import create_instance_storage

REPO = Path(__file__).resolve().parents[2]


def test_written_instance_limits_one_run_per_partition_and_the_writer_steps_to_the_run_slots(tmp_path):
    write_instance_yaml(tmp_path, max_concurrent_runs=3, partitions=5)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        concurrency = instance.get_concurrency_config()
        assert concurrency.run_queue_config.max_concurrent_runs == 3
        limits = concurrency.run_queue_config.tag_concurrency_limits
        assert limits == [{"key": f"crawl/frontier_p{p}", "limit": 1} for p in range(5)]
        assert concurrency.pool_config.default_pool_limit == 3  # writers take turns on the lake's lock
        assert concurrency.pool_config.pool_granularity.value == "op"
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] > 0
        assert instance.run_retries_enabled
        assert instance.run_monitoring_start_timeout_seconds == 60
        assert type(instance.run_launcher).__name__ == "ForkRunLauncher"  # runs forked from a warm process
        coordinator = instance.run_coordinator
        assert coordinator.dequeue_use_threads  # queued runs are launched side by side
        assert coordinator.dequeue_num_workers == 4
        assert coordinator.dequeue_interval_seconds == 0.5  # a partition's next batch run waits less


def test_the_run_queue_daemon_passes_at_the_fractional_interval(tmp_path):
    """The daemon's queue loop takes its interval from the coordinator: Dagster's own takes whole seconds."""
    from dagster._daemon.controller import create_daemon_of_type  # noqa: PLC0415
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon  # noqa: PLC0415

    write_instance_yaml(tmp_path)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        daemon = create_daemon_of_type(QueuedRunCoordinatorDaemon.daemon_type(), instance)
        assert daemon.interval_seconds == 0.5


def test_shipped_scale_out_instance_config_is_valid(tmp_path, monkeypatch):
    shutil.copy(REPO / "deploy" / "dagster.yaml", tmp_path / "dagster.yaml")
    for name, value in {"DAGSTER_PG_HOST": "db", "DAGSTER_PG_USER": "u", "DAGSTER_PG_PASSWORD": "p",
                        "DAGSTER_PG_DB": "d"}.items():
        monkeypatch.setenv(name, value)
    config, _cls = dagster_instance_config(str(tmp_path))
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    assert [item["key"] for item in limits] == [f"crawl/frontier_p{p}" for p in range(8)]
    assert config["concurrency"]["pools"] == {"default_limit": 8, "granularity": "op"}
    assert config["run_coordinator"]["config"]["dequeue_use_threads"] is True
    assert config["run_launcher"]["class"] == "ForkRunLauncher"


def test_the_embedded_instance_storage_is_created_once_before_the_processes_start(tmp_path):
    """`up` creates the SQLite storage itself, so the daemon, webserver and code servers starting
    together only open it (creating it from several processes at once can stamp its schema twice)."""
    write_instance_yaml(tmp_path)
    create_instance_storage(tmp_path)
    schedules = tmp_path / "schedules" / "schedules.db"
    assert schedules.exists()
    assert (tmp_path / "history" / "runs.db").exists()
    openers = [subprocess.Popen([sys.executable, "-c", OPEN_INSTANCE, str(tmp_path)]) for _ in range(3)]
    assert [p.wait(120) for p in openers] == [0, 0, 0]
    with sqlite3.connect(schedules) as db:
        assert len(db.execute("SELECT version_num FROM alembic_version").fetchall()) == 1


OPEN_INSTANCE = """import sys
from dagster import DagsterInstance
with DagsterInstance.from_config(sys.argv[1]) as instance:
    instance.get_runs_count()
    instance.all_instigator_state()
"""


def test_the_writer_pool_limit_can_be_set_below_the_run_slots(tmp_path):
    write_instance_yaml(tmp_path, max_concurrent_runs=4, writer_pool_limit=1)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1


def test_a_fresh_ui_opens_on_the_platform_not_on_the_community_sign_up_dialog(tmp_path, monkeypatch):
    write_instance_yaml(tmp_path / "written")
    with DagsterInstance.from_config(str(tmp_path / "written")) as instance:
        assert instance.nux_enabled is False
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", shipped / "dagster.yaml")
    for name in ("DAGSTER_PG_HOST", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"):
        monkeypatch.setenv(name, "x")
    config, _cls = dagster_instance_config(str(shipped))
    assert config["nux"] == {"enabled": False}


def test_a_stock_instance_keeps_the_limits_and_leaves_launcher_coordinator_and_storage_to_dagster(tmp_path):
    write_instance_yaml(tmp_path, max_concurrent_runs=3, partitions=2, stock=CUSTOM_PARTS)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_launcher) is DefaultRunLauncher
        assert type(instance.run_coordinator) is QueuedRunCoordinator
        assert instance.run_coordinator.dequeue_interval_seconds == 5  # Dagster's own pass over the queue
        assert type(instance.run_storage).__module__.startswith("dagster._core.storage.runs.sqlite")
        limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
        assert limits == [{"key": f"crawl/frontier_p{p}", "limit": 1} for p in range(2)]
        assert instance.run_retries_enabled
    assert "crawl_platform_dagster" not in (tmp_path / "dagster.yaml").read_text()


def test_only_the_platforms_parts_can_be_left_to_dagster(tmp_path):
    with pytest.raises(ValueError) as refused:
        write_instance_yaml(tmp_path, stock=["scheduler"])
    assert str(refused.value) == "no custom instance part scheduler; the parts are launcher, coordinator, storage"
