"""A run launcher that starts each run as a fork of a warm process: no Python start, no imports.

Dagster's ``DefaultRunLauncher`` asks the code server to start a run, and the code server spawns a
fresh interpreter that imports Dagster, the definitions, DuckDB and pandas before the first step:
most of a small batch run's CPU. :class:`ForkRunLauncher` keeps one fork server per launching
process (Python's ``multiprocessing`` forkserver, which imports ``preload_modules`` once) and forks
each run from it. The child runs exactly what ``dagster api execute_run`` runs, the command every
container launcher (Docker, Kubernetes, ECS) starts, so the run, its events and its steps are
Dagster's own. The forked runs share the warm process's memory pages until they write them.

The launcher records each run's process id and host as run tags. Run monitoring
(``run_monitoring`` in ``dagster.yaml``) asks :meth:`ForkRunLauncher.check_run_worker_health`
every poll: a run whose process has gone is failed at once, and ``run_retries`` starts it again
(landing is idempotent, so the batch still lands once). ``terminate`` sends the process SIGTERM,
which Dagster turns into an interruption that cancels the run. ``crawl-platform up`` and the tests
configure it through :func:`crawl_platform_dagster.instance.write_instance_yaml`.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dagster import Array, DagsterRun, Field, serialize_value

from crawl_platform_dagster.dagster_internals import (
    RUN_COMMAND_MODULE,
    CheckRunHealthResult,
    ConfigurableClass,
    ConfigurableClassData,
    ExecuteRunArgs,
    LaunchRunContext,
    RunLauncher,
    WorkerStatus,
    install_interrupt_handlers,
)
from crawl_platform_dagster.dagster_internals import execute_run as execute_run_command

PID_TAG = "crawl/run_pid"
HOST_TAG = "crawl/run_host"
DEFAULT_PRELOAD = (RUN_COMMAND_MODULE, "dagster_postgres", "pandas", "crawl_platform_dagster.definitions",
                   "crawl_platform_dagster.warm")
"""What the fork server imports once: Dagster's run command, its PostgreSQL storage, pandas (DuckDB
imports it at the first query with parameters), and the definitions with the whole engine. Not
Great Expectations: only quality runs use it, and preloaded it would keep its large memory in the
fork server for every crawl to pay for, while each quality run importing it costs seconds of CPU
(quality runs wait while batch runs go, so they are few).
``crawl_platform_dagster.warm`` comes last: it freezes what the others
imported out of the garbage collector's reach, so forked runs keep sharing those pages."""


def _warm_up() -> None:
    """The body of the one process forked at start-up: nothing; it only proves the server forks."""


TAGGED_WAIT_S = 60.0
"""How long a forked run waits for the launcher to record its process id before it starts anyway."""


def execute_run(input_json: str, tagged: Any) -> None:
    """The body of ``dagster api execute_run INPUT_JSON``, in a forked child, once the launcher
    has recorded the child's process id (``tagged`` is set): the run's record is not written by
    both at once."""
    install_interrupt_handlers()  # SIGTERM interrupts the run like SIGINT, as in the CLI
    tagged.wait(TAGGED_WAIT_S)
    execute_run_command([input_json])


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs on this machine (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no procfs: kill(0) is all there is
    return state not in ("Z", "X")


class ForkRunLauncher(RunLauncher, ConfigurableClass):
    """Launches each run as a fork of a process that already imported ``preload_modules``."""

    def __init__(self, inst_data: ConfigurableClassData | None = None,
                 preload_modules: Sequence[str] = DEFAULT_PRELOAD) -> None:
        self._inst_data = inst_data
        self._preload = list(preload_modules)
        self._context: Any = None
        # Each forked run's process handle and its event, kept until it ends: the event's
        # semaphore goes away with the last reference, maybe before the child has read it.
        self._children: dict[str, tuple[Any, Any]] = {}
        self._lock = threading.Lock()  # the daemon launches queued runs from several threads
        super().__init__()  # type: ignore[no-untyped-call]

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict[str, Field]:
        return {"preload_modules": Field(Array(str), is_required=False, default_value=list(DEFAULT_PRELOAD),
                                         description="Modules the fork server imports once for every run.")}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> ForkRunLauncher:
        return cls(inst_data=inst_data, **config_value)

    def _fork_context(self) -> Any:
        if self._context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(self._preload)
            self._context = context
        return self._context

    def start_fork_server(self, warm: Callable[[float], None] | None = None) -> threading.Thread:
        """Start the fork server now (it imports ``preload_modules`` in the background) rather than
        at the first launch; :mod:`crawl_platform_dagster.daemon` calls this as the daemon starts.

        A background thread then forks one process that does nothing. The fork server reads that
        request only once it has imported everything, so when the process has ended the server is
        warm, and ``warm`` is called with the seconds it took. Returns that thread."""
        context = self._fork_context()
        multiprocessing.forkserver.ensure_running()
        started = time.monotonic()

        def warm_up() -> None:
            process = context.Process(target=_warm_up, name="dagster-run-warm-up")
            process.start()
            process.join()
            if warm is not None:
                warm(time.monotonic() - started)

        thread = threading.Thread(target=warm_up, name="fork-server-warm-up", daemon=True)
        thread.start()
        return thread

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        if run.job_code_origin is None:
            raise ValueError(f"run {run.run_id} has no code origin to execute")
        args = ExecuteRunArgs(job_origin=run.job_code_origin, run_id=run.run_id,
                              instance_ref=self._instance.get_ref(), set_exit_code_on_failure=None)
        with self._lock:
            for run_id, (child, _event) in list(self._children.items()):
                if not child.is_alive():  # also reaps its handle
                    del self._children[run_id]
            fork = self._fork_context()
            tagged = fork.Event()
            process = fork.Process(target=execute_run, args=(serialize_value(args), tagged),
                                   name=f"dagster-run-{run.run_id[:8]}")
            process.start()
            self._children[run.run_id] = (process, tagged)
        try:
            self._instance.add_run_tags(run.run_id, {PID_TAG: str(process.pid), HOST_TAG: socket.gethostname()})
        finally:
            tagged.set()
        self._instance.report_engine_event(f"Forked process {process.pid} for the run from the warm fork server.",
                                           run, cls=self.__class__)

    def _worker(self, run: DagsterRun) -> tuple[int | None, str | None]:
        pid = run.tags.get(PID_TAG)
        return (int(pid) if pid and pid.isdigit() else None), run.tags.get(HOST_TAG)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        pid, host = self._worker(run)
        self._instance.report_run_canceling(run)
        if pid is None or host != socket.gethostname() or not process_alive(pid):
            self._instance.report_engine_event("The run's process is not running here; nothing to stop.",
                                               run, cls=self.__class__)
            return False
        os.kill(pid, signal.SIGTERM)
        return True

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        pid, host = self._worker(run)
        # Not launched by this launcher, or by one on another machine: nothing to look at here, so
        # the run timeout (``dagster/max_runtime``) is what fails it if its process is gone.
        if pid is None or host != socket.gethostname():
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"no process of this machine to check ({host})")
        if process_alive(pid):
            return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=str(pid))
        return CheckRunHealthResult(WorkerStatus.FAILED, f"the run's process {pid} is gone", run_worker_id=str(pid))
