"""Each private Dagster name the platform bets on (crawl_platform_dagster/dagster_internals.py) is still
there and still behaves as the platform relies on: a Dagster upgrade that loses a bet fails here, by
name, before a crawl finds out. The behaviour the custom parts build on it (a forked run, pooled
storage, the one-second sensor loop) is tested in test_launcher.py, test_sqlite_storage.py,
test_pooled_storage.py and test_daemon.py."""

import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import dagster
import pytest
from dagster import DagsterInstance, QueuedRunCoordinator

from crawl_platform_dagster import dagster_internals as internals
from crawl_platform_dagster import storage, storage_sqlite
from crawl_platform_dagster.coordinator import QuickQueuedRunCoordinator
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.launcher import ForkRunLauncher

REPO = Path(__file__).resolve().parents[2]


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_every_private_name_has_its_reason_and_no_public_twin():
    assert sorted(internals.__all__) == sorted(internals.WHY)
    assert all(len(reason) > 20 for reason in internals.WHY.values())
    # A name Dagster makes public leaves this module for the public one.
    assert [name for name in internals.__all__ if hasattr(dagster, name)] == []


def test_no_module_outside_dagster_internals_imports_private_dagster():
    private = []
    for folder in ("crawl_platform", "crawl_platform_dagster", "assets", "sensors", "resources"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "dagster_internals.py":
                continue
            text = path.read_text()
            if "from dagster._" in text or "import dagster._" in text or "from dagster import _" in text:
                private.append(str(path.relative_to(REPO)))
    assert private == []


def test_run_launcher_interface_is_the_one_the_fork_launcher_implements():
    assert issubclass(ForkRunLauncher, internals.RunLauncher)
    assert issubclass(ForkRunLauncher, internals.ConfigurableClass)
    assert internals.RunLauncher.__abstractmethods__ <= set(vars(ForkRunLauncher))
    assert not ForkRunLauncher.__abstractmethods__  # nothing left to implement: it can be made
    for method in ("supports_check_run_worker_health", "check_run_worker_health", "dispose"):
        assert hasattr(internals.RunLauncher, method), method  # run monitoring still asks these
    assert _parameters(internals.RunLauncher.check_run_worker_health) == ["self", "run"]
    assert _parameters(internals.LaunchRunContext)[0] == "dagster_run"
    result = internals.CheckRunHealthResult(internals.WorkerStatus.FAILED, "gone", run_worker_id="7")
    assert (result.status, result.msg, result.run_worker_id) == (internals.WorkerStatus.FAILED, "gone", "7")
    assert {internals.WorkerStatus.RUNNING, internals.WorkerStatus.FAILED} <= set(internals.WorkerStatus)


def test_configurable_class_data_rehydrates_the_classes_dagster_yaml_names(tmp_path):
    data = internals.ConfigurableClassData("crawl_platform_dagster.launcher", "ForkRunLauncher",
                                           "preload_modules: [json]\n")
    launcher = data.rehydrate(internals.ConfigurableClass)
    assert isinstance(launcher, ForkRunLauncher)
    assert launcher.inst_data == data
    assert launcher._preload == ["json"]
    write_instance_yaml(tmp_path)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_launcher) is ForkRunLauncher
        assert type(instance.run_coordinator) is QuickQueuedRunCoordinator
        assert type(instance.run_storage) is storage_sqlite._SqliteRunStorage


def test_execute_run_args_round_trip_through_the_run_command_input():
    assert _parameters(internals.ExecuteRunArgs)[:4] == ["job_origin", "run_id", "instance_ref",
                                                         "set_exit_code_on_failure"]
    command = importlib.import_module(internals.RUN_COMMAND_MODULE).execute_run_command
    assert command.params[0].name == "input_json"  # what execute_run passes first
    assert callable(command.main)


def test_the_fork_server_preloads_modules_that_exist():
    for module in ForkRunLauncher()._preload:
        assert importlib.util.find_spec(module) is not None, module


def test_sigterm_interrupts_a_process_that_installed_the_handlers():
    code = ("import os, signal, time\n"
            "from crawl_platform_dagster.dagster_internals import install_interrupt_handlers\n"
            "install_interrupt_handlers()\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    time.sleep(10)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n")
    for ignored in (False, True):  # SIGINT ignored: how a process started by `nohup … &` begins
        start = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                              check=False, preexec_fn=start)
        assert done.stdout.strip() == "interrupted", (ignored, done.stderr[-2000:])


def test_the_sensor_loop_constant_is_read_on_every_pass():
    module = internals.sensor_daemon()
    assert module.MIN_INTERVAL_LOOP_TIME == 5  # Dagster's loop, which docs/dagster.md compares with
    # Read as a module global inside the loop's functions (not bound once at import), so setting
    # it before the daemon starts changes every pass.
    readers = [f for f in vars(module).values()
               if isinstance(f, types.FunctionType) and f.__module__ == module.__name__
               and "MIN_INTERVAL_LOOP_TIME" in f.__code__.co_names]
    assert readers


def test_the_daemon_command_is_the_function_run_daemon_cli_calls():
    (entry,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "dagster-daemon"]
    assert entry.value == "dagster._daemon.cli:main"
    assert callable(importlib.import_module("dagster._daemon.cli").main)


def test_the_code_server_client_pings_over_a_socket():
    client_class = importlib.import_module("dagster._grpc.client").DagsterGrpcClient
    assert "socket" in _parameters(client_class)
    assert _parameters(client_class.ping) == ["self", "echo"]


def test_sqlite_storage_layout_and_engine_are_dagsters_own(tmp_path):
    base = str(tmp_path)
    assert internals.runs_directory(base) == os.path.join(base, "history", "")
    assert internals.event_logs_directory(base) == os.path.join(base, "history", "runs", "")
    assert internals.schedule_directory(base) == os.path.join(base, "schedules")
    assert internals.create_db_conn_string(base, "runs") == f"sqlite:///{base}/runs.db"
    engine = internals.create_engine(internals.create_db_conn_string(base, "probe"), pool_size=1, max_overflow=-1)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("select 1").scalar() == 1
    engine.dispose()
    # The stock storage on the same folder reads what the pooled one holds: same files, same schema.
    pooled = storage_sqlite.PooledSqliteStorage(base)
    stock = internals.DagsterSqliteStorage(base)
    assert isinstance(pooled.run_storage, internals.SqliteRunStorage)
    assert isinstance(pooled.event_log_storage, internals.SqliteEventLogStorage)
    assert isinstance(pooled.schedule_storage, internals.SqliteScheduleStorage)
    assert stock.run_storage.get_runs_count() == pooled.run_storage.get_runs_count() == 0


def test_sqlite_storage_constructors_take_what_the_pooled_storage_passes():
    assert _parameters(internals.DagsterSqliteStorage.__init__) == ["self", "base_dir", "inst_data"]
    assert _parameters(internals.SqliteRunStorage.__init__) == ["self", "conn_string", "inst_data"]
    assert _parameters(internals.SqliteScheduleStorage.__init__) == ["self", "conn_string", "inst_data"]
    assert _parameters(internals.SqliteRunStorage.from_local) == ["base_dir", "inst_data"]
    assert _parameters(internals.SqliteEventLogStorage.__init__)[:2] == ["self", "base_dir"]
    assert _parameters(internals.SqliteEventLogStorage._connect) == ["self", "shard"]
    assert _parameters(internals.SqliteEventLogStorage._initdb)[:2] == ["self", "engine"]
    assert hasattr(internals.SqliteEventLogStorage, "conn_string_for_shard")


@pytest.mark.parametrize("ours", [
    storage._RunStorage, storage._EventLogStorage, storage._ScheduleStorage,
    storage_sqlite._SqliteRunStorage, storage_sqlite._SqliteScheduleStorage, storage_sqlite._SqliteEventLogStorage,
])
def test_every_method_the_storages_override_is_still_dagsters(ours):
    """The pooled storages replace methods of Dagster's (schema probes, connections); one that
    Dagster renamed or re-shaped would silently stop being called."""
    dagster_bases = [c for c in ours.__mro__ if c.__module__.startswith(("dagster", "dagster_postgres"))]
    assert dagster_bases
    mine = {name: member for c in ours.__mro__ if c.__module__.startswith("crawl_platform_dagster")
            for name, member in vars(c).items()
            if callable(member) and not name.startswith("__") and name not in ("from_local",)}
    mine.pop("_memo_key", None)
    for name, member in mine.items():
        theirs = next((vars(c)[name] for c in dagster_bases if name in vars(c)), None)
        assert theirs is not None, f"{ours.__name__}.{name} overrides nothing in Dagster"
        if inspect.isfunction(member) and inspect.isfunction(theirs):
            assert _parameters(member) == _parameters(theirs), name


def test_the_failed_check_filter_is_the_one_the_event_log_takes():
    assert internals.AssetCheckExecutionRecordStatus.FAILED.value == "FAILED"
    history = DagsterInstance.ephemeral().event_log_storage.get_asset_check_execution_history
    assert "status" in _parameters(history)


def test_the_queue_daemon_reads_the_coordinators_fractional_interval(tmp_path):
    """No private import, but a bet all the same: the run queue daemon takes its period from the
    coordinator's ``dequeue_interval_seconds`` property, which the platform's coordinator makes
    fractional."""
    assert isinstance(QuickQueuedRunCoordinator.__dict__["dequeue_interval_seconds"], property)
    assert isinstance(QueuedRunCoordinator.__dict__["dequeue_interval_seconds"], property)
    daemons = importlib.import_module("dagster._daemon.controller")
    queue_daemon = importlib.import_module("dagster._daemon.run_coordinator.queued_run_coordinator_daemon")
    write_instance_yaml(tmp_path)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        daemon = daemons.create_daemon_of_type(queue_daemon.QueuedRunCoordinatorDaemon.daemon_type(), instance)
        assert daemon.interval_seconds == 0.5
