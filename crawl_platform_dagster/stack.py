"""The embedded stack behind ``crawl-platform up`` and the Celery worker behind ``crawl-platform worker``.

``up`` starts the broker, the Dagster daemon and webserver and the demo site, each process in its
own process group with one environment (absolute paths, the broker address), writes a
``dagster.yaml`` into ``DAGSTER_HOME`` when there is none (:mod:`crawl_platform_dagster.instance`),
and on Ctrl-C or SIGTERM stops everything it started. The Dagster processes themselves
are :class:`~crawl_platform_dagster.processes.DagsterProcesses`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
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
from crawl_platform_dagster.instance import (
    celery_run_config,
    missing_limits_hint,
    render_queue,
    write_instance_yaml,
    yaml_limited_partitions,
)
from crawl_platform_dagster.processes import DagsterProcesses


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
