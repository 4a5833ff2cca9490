"""Every private Dagster name the platform uses, and nothing else.

The platform depends on Dagster's public API (``import dagster``) everywhere but here: ruff forbids
``dagster._`` imports in every other module (TID251, ``pyproject.toml``). What is left here serves
the custom instance parts that ``dagster.yaml`` names (:mod:`~crawl_platform_dagster.launcher`,
:mod:`~crawl_platform_dagster.storage_sqlite`, :mod:`~crawl_platform_dagster.storage`), the daemon's
sensor loop (:mod:`~crawl_platform_dagster.daemon`), the stack's wait for its code server
(:mod:`~crawl_platform_dagster.stack`) and one alert query. Dagster publishes no base class for a
class named in ``dagster.yaml``, no setting for the sensor loop and no client for a code server,
so each name below is a bet that the next Dagster release keeps an internal.
``tests/dagster/test_dagster_internals.py`` fails when a bet is lost; docs/dagster.md ("What the
custom instance parts add") says what each part buys and how to run without it. With Dagster's
default launcher, coordinator and storage and its own daemon, only the alert query's name is used,
and the crawl is still correct (``tests/e2e/test_stock_instance.py``).

Names that are imported only inside one process (the daemon, a forked run, ``crawl-platform up``)
are functions that import them when called, so that importing this module stays cheap.
"""

from __future__ import annotations

import importlib
import signal
from collections.abc import Sequence
from types import ModuleType

from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, RunLauncher, WorkerStatus
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import create_db_conn_string
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import ConfigurableClass, ConfigurableClassData

WHY: dict[str, str] = {
    "RunLauncher": "the base class of a run launcher (ForkRunLauncher); Dagster documents it under "
                   "Internals and exports only DefaultRunLauncher",
    "LaunchRunContext": "what Dagster hands RunLauncher.launch_run",
    "CheckRunHealthResult": "what RunLauncher.check_run_worker_health returns to run monitoring",
    "WorkerStatus": "the run worker states in a CheckRunHealthResult",
    "ExecuteRunArgs": "the argument of `dagster api execute_run`, which a forked run executes as every "
                      "container launcher does",
    "ConfigurableClass": "what a class named in dagster.yaml implements; no public name exists",
    "ConfigurableClassData": "what such a class receives (its module, class and config)",
    "DagsterSqliteStorage": "Dagster's default instance storage, which PooledSqliteStorage extends on the same files",
    "SqliteRunStorage": "its run storage, extended to keep one engine per file per process",
    "SqliteEventLogStorage": "its event log storage, extended likewise",
    "SqliteScheduleStorage": "its schedule storage, extended likewise",
    "create_engine": "Dagster's SQLite engine factory (its pragmas: WAL, the busy timeout)",
    "create_db_conn_string": "the connection string of one of its database files",
    "runs_directory": "where it keeps the runs database",
    "event_logs_directory": "where it keeps the event logs",
    "schedule_directory": "where it keeps sensor and schedule state",
    "AssetCheckExecutionRecordStatus": "the status filter of instance.event_log_storage."
                                       "get_asset_check_execution_history (the failed quality checks the "
                                       "alert sensor reads); the method is reachable, its argument's type "
                                       "is not exported",
    "RUN_COMMAND_MODULE": "the module the fork server imports so that a run starts without importing it",
    "execute_run": "`dagster api execute_run` in a forked process",
    "install_interrupt_handlers": "SIGTERM cancels a forked run as it cancels one Dagster started",
    "sensor_daemon": "the sensor loop's period, a module constant no setting reaches",
    "run_daemon_cli": "`dagster-daemon` in a process that set up the sensor loop and fork server first",
    "code_server_ping": "whether a code server serves yet, without an interpreter per poll",
}
"""Each private name here and what it buys; ``tests/dagster/test_dagster_internals.py`` checks
that Dagster still has each one, and that this list and ``__all__`` agree."""

__all__ = [
    "RUN_COMMAND_MODULE",
    "AssetCheckExecutionRecordStatus",
    "CheckRunHealthResult",
    "ConfigurableClass",
    "ConfigurableClassData",
    "DagsterSqliteStorage",
    "ExecuteRunArgs",
    "LaunchRunContext",
    "RunLauncher",
    "SqliteEventLogStorage",
    "SqliteRunStorage",
    "SqliteScheduleStorage",
    "WorkerStatus",
    "code_server_ping",
    "create_db_conn_string",
    "create_engine",
    "event_logs_directory",
    "execute_run",
    "install_interrupt_handlers",
    "run_daemon_cli",
    "runs_directory",
    "schedule_directory",
    "sensor_daemon",
]

RUN_COMMAND_MODULE = "dagster._cli.api"
"""The module of ``dagster api execute_run``: the fork server imports it once, so a forked run
starts without importing Dagster's command line."""


def execute_run(argv: Sequence[str]) -> None:
    """``dagster api execute_run ARGV`` in this process (a forked run): the same command every
    container launcher starts, so the run, its events and its steps are Dagster's own."""
    from dagster._cli.api import execute_run_command  # noqa: PLC0415 - preloaded by the fork server

    execute_run_command.main(list(argv), prog_name="dagster api execute_run", standalone_mode=False)


def install_interrupt_handlers() -> None:
    """Make SIGTERM interrupt this process as SIGINT does, as Dagster's own run command does, so
    that terminating a forked run cancels it cleanly. Dagster gives SIGTERM whatever SIGINT does;
    a process started in the background of a non-interactive shell (``nohup … &``, a CI job)
    inherits SIGINT ignored, and Python then keeps it ignored, so SIGINT gets Python's default
    handler first: a run stays cancellable however its daemon was started."""
    from dagster._utils.interrupts import setup_interrupt_handlers  # noqa: PLC0415

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    setup_interrupt_handlers()


def sensor_daemon() -> ModuleType:
    """Dagster's sensor daemon module: its ``MIN_INTERVAL_LOOP_TIME`` (5 s) is how often the daemon
    passes over the sensors, read on every pass and offered by no setting."""
    return importlib.import_module("dagster._daemon.sensor")


def run_daemon_cli() -> None:
    """``dagster-daemon`` in this process, with ``sys.argv``; the daemon then runs with what this
    process set up before (the sensor loop, the fork server)."""
    from dagster._daemon.cli import main  # noqa: PLC0415

    main()


def code_server_ping(socket_path: str) -> None:
    """Ask the code server on ``socket_path`` whether it serves; raises while it does not. Dagster
    has a command for this (``dagster api grpc-health-check``), but a new interpreter per poll
    costs seconds of CPU while the server loads."""
    from dagster._grpc.client import DagsterGrpcClient  # noqa: PLC0415

    DagsterGrpcClient(socket=socket_path).ping("ready")


def runs_directory(base_dir: str) -> str:
    """Where Dagster's SQLite storage keeps the runs database in ``base_dir``."""
    from dagster._core.storage.sqlite_storage import _runs_directory  # noqa: PLC0415

    return str(_runs_directory(base_dir))


def event_logs_directory(base_dir: str) -> str:
    """Where it keeps the event logs (one file per run, plus an index)."""
    from dagster._core.storage.sqlite_storage import _event_logs_directory  # noqa: PLC0415

    return str(_event_logs_directory(base_dir))


def schedule_directory(base_dir: str) -> str:
    """Where it keeps sensor and schedule state."""
    from dagster._core.storage.sqlite_storage import _schedule_directory  # noqa: PLC0415

    return str(_schedule_directory(base_dir))

