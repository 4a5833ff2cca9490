"""The embedded stack behind ``crawl-platform up`` and the Celery worker behind ``crawl-platform worker``.

``up`` starts the broker, the Dagster daemon and webserver and the demo site, each process in its
own process group with one environment (absolute paths, the broker address), writes a
``dagster.yaml`` into ``DAGSTER_HOME`` when there is none (:mod:`crawl_platform_dagster.instance`),
and on Ctrl-C or SIGTERM stops everything it started. The end-to-end tests use
:class:`DagsterProcesses` from here too, so they run the platform the way a user does.
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

from crawl_platform.bus.base import BusError
from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker, port_open
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.cli.demo_site import DemoSite, SiteServer
from crawl_platform.config import Settings
from crawl_platform.pipeline.submission import OUT_OF_REACH, build_crawl_request, submit_crawl
from crawl_platform.redaction import redact_passwords
from crawl_platform.storage import is_object_url
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import one_line
from crawl_platform_dagster.daemon import WARM_MESSAGE
from crawl_platform_dagster.instance import (
    celery_run_config,
    missing_limits_hint,
    render_queue,
    write_instance_yaml,
    yaml_limited_partitions,
)

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


def stack_settings(settings: Settings, embedded: bool, allow_private: bool) -> Settings:
    """Settings every child shares: absolute paths, so runs see the same files whatever their cwd."""
    update: dict[str, object] = {
        "dagster_home": settings.dagster_home.resolve(),
        "lake_path": settings.lake_path.resolve(),
        "handoff_dir": settings.handoff_dir if is_object_url(settings.handoff_dir)
        else str(Path(settings.handoff_dir).resolve()),
    }
    if embedded and "kafka_exact_log_ends" not in settings.model_fields_set:
        update.update(EMBEDDED_BUS_SETTINGS)
    if allow_private and "allowed_networks" not in settings.model_fields_set:
        update["allowed_networks"] = ["127.0.0.0/8"]  # the demo site is on loopback
    return settings.model_copy(update=update)


def create_instance_storage(home: Path) -> None:
    """Create (or migrate) the instance's storage here, once, before the daemon, the webserver
    and the code servers start: on an embedded (SQLite) instance, several processes creating a
    fresh DAGSTER_HOME at once can each stamp its schema version, and every later start then fails
    with "Version table 'alembic_version' has more than one head present"."""
    from dagster import DagsterInstance  # noqa: PLC0415 - the engine's commands do not import Dagster

    with DagsterInstance.from_config(str(home)) as instance:
        # Creating the instance creates its run, event-log and schedule storage; use two of them.
        instance.get_runs_count()
        instance.all_instigator_state()


def create_lake(settings: Settings) -> str | None:
    """Create the lake (its catalog and tables) if it is new, before the first crawl: otherwise the
    first submission pays for it on the way to its first row. Returns None, or one
    line saying why the lake is out of reach (the crawl commands and the runs then report it)."""
    store = CrawlStore.from_settings(settings)
    try:
        store.ensure_schema()
    except OUT_OF_REACH as err:
        return one_line(str(err)) or type(err).__name__
    finally:
        store.close()  # this process only supervises: it keeps no lake attached
    return None


def run_stack(settings: Settings, port: int, demo_pages: int, broker_port: int = 0) -> int:
    """Run everything in the foreground until Ctrl-C or SIGTERM; returns the exit code."""
    if port_open("127.0.0.1", port):
        print(f"crawl-platform: port {port} is in use (another Dagster webserver?); use --port", file=sys.stderr)
        return 1
    home = settings.dagster_home.resolve()
    if not (home / "dagster.yaml").exists():
        write_instance_yaml(home, partitions=settings.topic_partitions)
    embedded = "kafka_bootstrap_servers" not in settings.model_fields_set
    unlimited = unlimited_partitions_error(home / "dagster.yaml", settings, embedded)
    if unlimited:
        print(f"crawl-platform: {unlimited}", file=sys.stderr)
        return 2
    create_instance_storage(home)
    lake_error = create_lake(settings)
    if lake_error:
        print(f"crawl-platform: warning: the lake is out of reach for now: {lake_error}", file=sys.stderr)
    logs = home / "crawl-platform-logs"  # Dagster itself owns DAGSTER_HOME/logs
    logs.mkdir(parents=True, exist_ok=True)
    broker = None
    if embedded:
        host, _, default_port = settings.kafka_bootstrap_servers.rpartition(":")
        broker = EmbeddedBroker(host, broker_port or int(default_port), log_path=logs / "broker.log").start()
        print(f"embedded Kafka-wire broker (Tansu) on {broker.bootstrap_servers}, data in memory")
        settings = settings.model_copy(update={"kafka_bootstrap_servers": broker.bootstrap_servers})
    child_settings = stack_settings(settings, embedded, allow_private=demo_pages > 0)
    workspace = Path.cwd() / "workspace.yaml"
    dagster = DagsterProcesses({**os.environ, **child_settings.to_env()}, logs, port,
                               workspace if workspace.exists() else None).start()
    site: SiteServer | None = None
    try:
        print(f"starting Dagster (DAGSTER_HOME={home}, logs in {logs}) ...", flush=True)
        if not dagster.wait_webserver():
            print(f"crawl-platform: Dagster did not start; see {logs}", file=sys.stderr)
            return 1
        print(f"Dagster UI: http://127.0.0.1:{port}   lake: {child_settings.lake_path}", flush=True)
        if dagster.wait_warm():
            print("runs start warm: the run fork server has imported the definitions", flush=True)
        if demo_pages:
            site = _serve_and_submit_demo(child_settings, demo_pages)
        print("crawl your own sites with `crawl-platform crawl URL`; Ctrl-C stops everything", flush=True)
        return _supervise(dagster, logs)
    finally:
        print("stopping ...", flush=True)
        dagster.stop()
        if site is not None:
            site.close()
        if broker is not None:
            broker.stop()


def unlimited_partitions_error(instance_yaml: Path, settings: Settings, embedded: bool) -> str | None:
    """Why ``up`` must not start: a frontier partition that ``instance_yaml`` does not limit to one
    run at a time (two runs could then fetch one host at once). The topic has
    ``CRAWL_TOPIC_PARTITIONS`` partitions, or more if it already exists on a cluster of one's own."""
    partitions = settings.topic_partitions
    if not embedded:
        with contextlib.suppress(BusError):  # a missing topic is created with the setting's count
            partitions = max(partitions, len(KafkaBus.from_settings(settings).partition_ids(settings.frontier_topic)))
    limited = yaml_limited_partitions(instance_yaml)
    missing = sorted(set(range(partitions)) - limited)
    if not missing:
        return None
    held = f"frontier partitions {', '.join(map(str, sorted(limited)))}" if limited else "no frontier partition"
    return (f"{instance_yaml} limits {held} to one run at a time, but the frontier topic has {partitions}: "
            f"{missing_limits_hint(missing)}, or delete the file to have it written anew")


def _serve_and_submit_demo(settings: Settings, pages: int) -> SiteServer:
    site = DemoSite(n_pages=pages).serve()
    request = build_crawl_request([site.base_url + "/"], crawl_id=f"demo-{int(time.time())}",
                                  max_pages=pages * 2, max_depth=20)
    submit_crawl(KafkaBus.from_settings(settings), request)
    print(f"demo site on {site.base_url}; submitted crawl {request.crawl_id}", flush=True)
    return site


def _supervise(dagster: DagsterProcesses, logs: Path) -> int:
    """Block until Ctrl-C / SIGTERM (0) or until a Dagster process dies (1)."""
    stopping = False

    def stop(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    # Both set explicitly: a process started in the background by a shell without job control
    # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt (an `up` started
    # with `&` in a script would go on after its Ctrl-C).
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            dead = dagster.dead()
            if dead:
                print(f"crawl-platform: {', '.join(dead)} exited; see {logs}", file=sys.stderr)
                return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    return 0


WORKER_QUEUES = ("all", "fetch", "render")


def celery_worker_argv(settings: Settings, concurrency: int, name: str | None = None, queues: str = "all") -> list[str]:
    """Command line of a Dagster Celery worker for this platform (config written into DAGSTER_HOME):
    ``queues`` ``fetch`` takes the batch steps but rendering, ``render`` only the render steps
    (browsers), ``all`` both."""
    home = settings.dagster_home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "celery.yaml"
    config.write_text(json.dumps(celery_run_config(settings)))  # JSON is valid YAML
    names = {"all": [settings.celery_queue, render_queue(settings)], "fetch": [settings.celery_queue],
             "render": [render_queue(settings)]}[queues]
    argv = [str(Path(sys.executable).parent / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
            "-y", str(config), "-q", ",".join(names)]
    if name:
        argv += ["--name", name]
    return [*argv, "--", f"--concurrency={concurrency}"]


def run_worker(settings: Settings, concurrency: int, queues: str = "all") -> int:
    """A Celery worker in the foreground until Ctrl-C; it runs batch steps of crawl_batch_celery_job
    (those of ``queues``: see :func:`celery_worker_argv`)."""
    env = {**os.environ, **settings.to_env()}
    env["DAGSTER_HOME"] = str(settings.dagster_home.resolve())
    env["CRAWL_LAKE_PATH"] = str(settings.lake_path.resolve())
    # dagster-celery starts `celery` from PATH: make it this environment's.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    print(f"Celery worker on {redact_passwords(settings.celery_broker)} (concurrency {concurrency}, "
          f"{queues} steps); Ctrl-C stops it", flush=True)
    try:
        return subprocess.call(celery_worker_argv(settings, concurrency, queues=queues), env=env)
    except KeyboardInterrupt:
        return 0
