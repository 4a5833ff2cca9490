"""The Dagster processes of a stack: a code server, ``dagster-daemon`` and ``dagster-webserver``.

:class:`DagsterProcesses` starts each in its own process group with one environment, waits for
the code server and the webserver, and stops them all, with whatever Dagster processes of the
instance they leave behind (:func:`instance_processes`). ``crawl-platform up``
(:mod:`crawl_platform_dagster.stack`) runs it, and so do the end-to-end tests and the benchmarks,
so they run the platform the way a user does; it is apart from the stack because it knows nothing
of the broker, the lake or the demo site that ``up`` sets up around it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from crawl_platform.bus.broker import port_open
from crawl_platform_dagster.daemon import WARM_MESSAGE

LOCATION_NAME = "crawl_platform_dagster.definitions"
"""The code location's name, as ``workspace.yaml``'s ``python_module`` entry names it: sensor
cursors, run keys and schedules are kept per location name, so they survive a switch between a
workspace that starts its own code server and one that connects to a running one."""

STOP_GRACE_S = 15.0
"""How long :meth:`DagsterProcesses.stop` lets the processes finish (a run records its
interruption) before it kills them."""

CODE_SERVER_START_S = 180.0
"""How long :meth:`DagsterProcesses.start` waits for the code server to load the definitions."""


class DagsterProcesses:
    """A code server, ``dagster-daemon`` and (optionally) ``dagster-webserver`` on this project's definitions.

    The code server (``dagster api grpc``) runs for as long as the stack does, and the daemon and
    the webserver connect to it through a workspace file written next to the logs (a
    ``grpc_server`` entry). Given ``workspace.yaml``'s ``python_module`` entry instead, the daemon
    would start a code server of its own and replace it every 60 s (Dagster's workspace refresh),
    importing Dagster, DuckDB, pandas and the definitions anew each time, a steady cost on an idle
    stack (measured by ``benchmarks/platform_cost.py``), and the webserver would run a second one.
    This is Dagster's own deployment shape for a code location (docs/deployment.md).

    With ``stock``, the processes are Dagster's as they come: ``dagster-daemon run`` and
    ``dagster-webserver`` on ``workspace`` (which must be given), each starting the code server it
    needs, and the sensor loop Dagster's own (docs/dagster.md, "What the custom instance parts add")."""

    def __init__(self, env: dict[str, str], log_dir: Path, webserver_port: int | None = 3000,
                 workspace: Path | None = None, stock: bool = False) -> None:
        if stock and workspace is None:
            raise ValueError("a stock Dagster stack loads its definitions from a workspace file")
        self.env = env
        self.log_dir = log_dir
        self.webserver_port = webserver_port
        self.workspace = workspace
        self.stock = stock
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.log_starts: dict[str, int] = {}
        self._socket_dir: str | None = None

    def _code_server_argv(self, socket_path: str) -> list[str]:
        bin_dir = Path(sys.executable).parent
        working_directory = self.workspace.parent if self.workspace is not None else Path.cwd()
        return [str(bin_dir / "dagster"), "api", "grpc", "-m", LOCATION_NAME, "-d", str(working_directory),
                "--socket", socket_path, "--location-name", LOCATION_NAME, "--log-level", "warning"]

    def _start_code_server(self) -> Path:
        """Start the code server; returns the workspace file that points the daemon at it."""
        # A socket path must stay under about 100 bytes, so it lives in a short temporary folder.
        self._socket_dir = tempfile.mkdtemp(prefix="crawl-code-")
        socket_path = os.path.join(self._socket_dir, "grpc.sock")
        self._spawn("code-server", self._code_server_argv(socket_path))
        workspace = self.log_dir / "workspace.yaml"
        workspace.write_text(json.dumps({"load_from": [{"grpc_server": {
            "socket": socket_path, "location_name": LOCATION_NAME}}]}))  # JSON is valid YAML
        self._wait_code_server(socket_path)
        return workspace

    def _wait_code_server(self, socket_path: str) -> None:
        # Dagster only now: the engine's commands import none of it.
        from crawl_platform_dagster.dagster_internals import code_server_ping  # noqa: PLC0415

        deadline = time.monotonic() + CODE_SERVER_START_S
        while time.monotonic() < deadline and self.processes["code-server"].poll() is None:
            if os.path.exists(socket_path):
                with contextlib.suppress(Exception):  # not serving yet
                    code_server_ping(socket_path)
                    return
            time.sleep(0.2)
        # The daemon reports the unloadable location; the code server's log says why.

    def start(self) -> DagsterProcesses:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        bin_dir = Path(sys.executable).parent
        if self.stock:
            target = ["-w", str(self.workspace)]
            self._spawn("daemon", [str(bin_dir / "dagster-daemon"), "run", *target])
        else:
            target = ["-w", str(self._start_code_server())]
            # dagster-daemon, with the run launcher's fork server started first (crawl_platform_dagster/daemon.py)
            self._spawn("daemon", [sys.executable, "-m", "crawl_platform_dagster.daemon", "run", *target])
        if self.webserver_port:
            self._spawn("webserver", [str(bin_dir / "dagster-webserver"), "-h", "127.0.0.1",
                                      "-p", str(self.webserver_port), *target])
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        self.log_starts[name] = log.tell()  # the log is appended to: what this start wrote comes after
        with _children_take_sigint():
            self.processes[name] = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                    start_new_session=True)

    def wait_webserver(self, timeout_s: float = 90.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.webserver_port and port_open("127.0.0.1", self.webserver_port):
                return True
            if any(p.poll() is not None for p in self.processes.values()):
                return False
            time.sleep(0.5)
        return False

    def wait_warm(self, timeout_s: float = 120.0) -> bool:
        """Wait until the daemon says its run fork server is warm (:data:`WARM_MESSAGE`); False
        after ``timeout_s``, when a process died, or at once when the instance's run launcher is
        not the fork launcher (nothing to wait for)."""
        yaml = Path(self.env.get("DAGSTER_HOME", "")) / "dagster.yaml"
        if "ForkRunLauncher" not in (yaml.read_text() if yaml.is_file() else ""):
            return False
        log, marker = self.log_dir / "daemon.log", WARM_MESSAGE.encode()
        start = self.log_starts.get("daemon", 0)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.dead():
            if log.exists() and marker in log.read_bytes()[start:]:
                return True
            time.sleep(0.25)
        return False

    def dead(self) -> list[str]:
        return [name for name, p in self.processes.items() if p.poll() is not None]

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to every process group, then SIGKILL to those still running ``grace_s`` later
        (one deadline for all of them); says on stderr which had to be killed."""
        for proc in self.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for name, proc in self.processes.items():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"crawl-platform: {name} did not stop within {grace_s:g} s of SIGTERM; killed",
                      file=sys.stderr, flush=True)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.processes.clear()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        home = self.env.get("DAGSTER_HOME")
        if home:
            # The daemon's code servers and their run workers live in sessions of their own and
            # could outlive it by their 20 s heartbeat timeout, or for good once orphaned.
            for pid in instance_processes(home):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _children_take_sigint() -> Iterator[None]:
    """Processes started inside this block get SIGINT's default action, even where this process
    ignores it. A command put in the background by a non-interactive shell (``nohup
    crawl-platform up &`` in a script) starts with SIGINT ignored, and its children inherit that;
    Dagster's code server maps SIGTERM to whatever SIGINT does (``setup_interrupt_handlers``), so
    it would ignore SIGTERM too: a stop would wait :data:`STOP_GRACE_S` and kill it. (Runs install
    their own SIGINT handler, so they can be terminated either way.) A signal a process catches is
    reset to its default action in a new program, so this process catches SIGINT, doing
    nothing, while it starts them: it still ignores SIGINT, and they do not."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.signal(signal.SIGINT, _ignore)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """A SIGINT that comes while :func:`_children_take_sigint` starts a process: ignored, as outside it."""


# Code servers, run workers (the fork server of crawl_platform_dagster/launcher.py and its forked
# runs) and their helpers; not Celery workers, which may serve other stacks.
_INSTANCE_COMMANDS = (b"dagster\0api\0grpc", b"multiprocessing.spawn", b"multiprocessing.forkserver",
                      b"multiprocessing.resource_tracker", b"watch_orphans.py")


def instance_processes(dagster_home: str, commands: tuple[bytes, ...] = _INSTANCE_COMMANDS) -> list[int]:
    """PIDs of Dagster processes (code servers, run workers, their helpers; or those whose command
    line holds one of ``commands``) of the instance in ``dagster_home``, found by their
    environment; never this process."""
    wanted = f"DAGSTER_HOME={dagster_home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0") and any(c in cmdline for c in commands):
            found.append(int(entry.name))
    return found
