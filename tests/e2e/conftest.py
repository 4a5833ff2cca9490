"""The platform as a user runs it, for end-to-end tests: the Dagster daemon (sensors, run queue,
run launcher) on this repository's workspace, instance storage on PostgreSQL, the session's
broker, per-module topics and lake (an embedded SQLite catalog, or one on PostgreSQL)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, free_port
from crawl_platform.cli.demo_site import DemoSite, SiteServer
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from crawl_platform_dagster.instance import CUSTOM_PARTS, write_instance_yaml
from crawl_platform_dagster.processes import DagsterProcesses
from crawl_platform_dagster.stack import create_instance_storage
from tests.conftest import fresh_postgres_database, lake_catalog

REPO = Path(__file__).resolve().parents[2]
# The installed `crawl-platform` script: the engine's commands plus `up` and `worker`.
CRAWL_PLATFORM = [sys.executable, "-m", "crawl_platform_dagster.cli"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest first on pytest-xdist: `make test` hands modules to its workers in collection order
    (`--dist loadfile --no-loadscope-reorder`), so the e2e modules go first, ordered by the
    `seconds` of their `e2e` mark, and the short tests fill the workers as they free up; the run then
    lasts about as long as its longest module, not a slow module started last. A serial run keeps the
    usual order. Pytest passes a sub-folder conftest's hook the whole session's items; the sort is
    stable, so each module's tests keep their order."""
    if not hasattr(config, "workerinput"):
        return

    def seconds(item: pytest.Item) -> float:
        mark = item.get_closest_marker("e2e")
        return 0.0 if mark is None else float(mark.kwargs.get("seconds", 1))

    items.sort(key=seconds, reverse=True)


@pytest.fixture(scope="module")
def start_platform(broker, tmp_path_factory):
    """Call with Settings overrides; returns (settings, env). One platform runs at a time: a new
    one stops the module's previous one (an idle Dagster stack still costs a fifth of a core),
    and the last is stopped at the end of the module."""
    started = []
    databases = []

    def stop_started() -> None:
        while started:
            dagster, tmp = started.pop()
            # Not the 15 s a user's stack gets: a code server busy in a sensor evaluation at the end
            # of a module would cost each module's teardown all of them.
            dagster.stop(grace_s=5)
            for log in sorted((tmp / "logs").glob("*.log")):
                sys.stderr.write(f"--- {log.name} (tail)\n{log.read_text()[-3000:]}\n")

    def start(max_concurrent_runs: int = 4, with_processes: bool = False, lake_on_postgres: bool = False,
              stock_instance: bool = False, webserver: bool = False, **overrides):
        """``webserver``: also ``dagster-webserver`` (the UI and its GraphQL API, the Launchpad's) on a
        free loopback port, up before this returns (``dagster.webserver_port``, with ``with_processes``).
        ``lake_on_postgres``: the lake's catalog in a database of its own on the machine's
        PostgreSQL (the scale-out profile) instead of the embedded SQLite file. ``stock_instance``:
        Dagster as it comes, none of the platform's instance parts: its default run launcher, run
        coordinator and SQLite storage in DAGSTER_HOME, ``dagster-daemon run`` on workspace.yaml."""
        stop_started()
        tmp = tmp_path_factory.mktemp("platform")
        if lake_on_postgres:
            lake_database = fresh_postgres_database()
            overrides = {"lake_catalog": lake_catalog(lake_database.__enter__()),
                         "lake_data_path": str(tmp / "shared" / "lake-data"), **overrides}
            databases.append(lake_database)
        tag = uuid.uuid4().hex[:8]
        values = {
            "kafka_bootstrap_servers": broker.bootstrap_servers, **EMBEDDED_BUS_SETTINGS,
            "seeds_topic": f"seeds-{tag}", "frontier_topic": f"frontier-{tag}", "dead_letter_topic": f"dead-{tag}",
            "pages_topic": f"pages-{tag}",
            "control_topic": f"control-{tag}",
            "topic_partitions": 4, "lake_path": tmp / "lake", "dagster_home": tmp / "dagster_home",
            "handoff_dir": tmp / "handoff",
            "allowed_networks": ["127.0.0.0/8"], "celery_queue": f"crawl-test-{tag}", **overrides,
        }
        settings = Settings(**values)
        if stock_instance:
            write_instance_yaml(settings.dagster_home, max_concurrent_runs=max_concurrent_runs,
                                partitions=settings.topic_partitions, stock=CUSTOM_PARTS)
            create_instance_storage(settings.dagster_home)
        else:
            database = fresh_postgres_database()
            pg_url = database.__enter__()
            databases.append(database)
            write_instance_yaml(settings.dagster_home, postgres_url=pg_url, max_concurrent_runs=max_concurrent_runs,
                                partitions=settings.topic_partitions)
        env = {**os.environ, **settings.to_env()}
        dagster = DagsterProcesses(env, tmp / "logs", webserver_port=free_port() if webserver else None,
                                   workspace=REPO / "workspace.yaml", stock=stock_instance)
        dagster.start()
        started.append((dagster, tmp))
        time.sleep(5)
        assert not dagster.dead(), f"the Dagster daemon exited at start; see {tmp / 'logs'}"
        if webserver:
            assert dagster.wait_webserver(), f"the Dagster webserver did not come up; see {tmp / 'logs'}"
        return (settings, env, dagster) if with_processes else (settings, env)

    yield start
    stop_started()
    for database in databases:
        database.__exit__(None, None, None)


@contextlib.contextmanager
def lake_reader(settings: Settings, folder: Path) -> Iterator[dict[str, Any]]:
    """An analyst's notebook holding the lake open (tests/e2e/lake_reader.py, its own process) for
    the ``with`` block; afterwards the yielded dict holds what it saw: ``reads`` (page counts at
    the start and end of each one-second reading transaction) and ``errors``."""
    location = LakeLocation.from_settings(settings)
    stop, out = folder / "reader.stop", folder / "reader.json"
    with open(folder / "reader.log", "wb") as log:
        reader = subprocess.Popen([sys.executable, "-m", "tests.e2e.lake_reader", str(location.sqlite_path),
                                   location.data_path, str(stop), str(out)],
                                  cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        seen: dict[str, Any] = {}
        try:
            yield seen
        finally:
            stop.touch()
            reader.wait(120)
    assert reader.returncode == 0, (folder / "reader.log").read_text()[-3000:]
    seen.update(json.loads(out.read_text()))


def cli(env, *args, timeout=400):
    """Run the crawl-platform command line as a user would."""
    return subprocess.run([*CRAWL_PLATFORM, *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


@contextlib.contextmanager
def celery_worker(env, log_path: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``crawl-platform worker`` as a user starts it, its output in ``log_path``; checked alive
    after its start-up and stopped with SIGTERM to its process group on exit."""
    with open(log_path, "wb") as log:
        worker = subprocess.Popen([*CRAWL_PLATFORM, "worker", *args], env=env, cwd=REPO, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            time.sleep(5)
            assert worker.poll() is None, log_path.read_text(errors="replace")[-3000:]
            yield worker
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(60)


class Sites:
    """Several demo sites on loopback, one host (port) each: the generated site of a fault test."""

    def __init__(self, total_pages: int, hosts: int, seed: int) -> None:
        self.sites = [DemoSite(n_pages=total_pages // hosts, seed=seed + i) for i in range(hosts)]
        self.servers: list[SiteServer] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "Sites":
        self.servers = [self._stack.enter_context(site.serve()) for site in self.sites]
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def seeds(self) -> list[str]:
        return [server.base_url + "/" for server in self.servers]

    def expected_urls(self) -> set[str]:
        return set().union(*(server.site.expected_urls(server.base_url) for server in self.servers))


def assert_landed_exactly_once(store: CrawlStore, crawl_id: str, expected: set[str]) -> None:
    """Every reachable URL is in `pages` once, no duplicate rows, nothing left pending."""
    urls = [r[0] for r in store.query("SELECT url FROM pages WHERE crawl_id = ?", [crawl_id])]
    assert len(urls) == len(set(urls)), "duplicate rows in pages: " + repr(store.query(
        """SELECT url, version, batch_id, status, error, content_hash FROM pages WHERE crawl_id = ?
           QUALIFY count(*) OVER (PARTITION BY url) > 1 ORDER BY url, version LIMIT 6""", [crawl_id]))
    assert set(urls) == expected, (f"missing {len(expected - set(urls))}, unexpected {len(set(urls) - expected)}")
    pending = store.query("SELECT count(*) FROM frontier WHERE crawl_id = ? AND state IN ('discovered', 'queued')",
                          [crawl_id])[0][0]
    assert pending == 0, f"{pending} URLs left pending"
