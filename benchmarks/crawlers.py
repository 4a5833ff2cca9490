"""The crawls the comparison runs against one served site, each measured the same way.

- `crawl_with_platform(mode="dagster")`: the platform's embedded default as a user runs it: the
  embedded broker, the Dagster daemon (`crawl_platform_dagster.instance.write_instance_yaml`,
  `crawl_platform_dagster.processes.DagsterProcesses`), then `crawl-platform crawl SEED --wait`.
- `crawl_with_platform(mode="engine")`: the same engine objects in a plain loop with no Dagster
  (`crawl_benchmark.run_engine`), in a child process so that its CPU and memory are measured like
  the others'. Run as `python benchmarks/crawlers.py engine SEED` with the settings in the env.
- `crawl_with_peer`: another crawler in a child process, `scrapy_spider.py` (Scrapy) or
  `crawlee_spider.py` (Crawlee for Python's ParselCrawler).

Each returns a :class:`CrawlResult`: pages, wall, CPU, peak memory, seed-to-first-page time, the
requests the server saw, and whether every expected page landed exactly once. Processes started
here are stopped on every path out (exceptions and Ctrl-C included), and every wait is bounded.
"""

from __future__ import annotations

import collections
import json
import math
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

from crawl_benchmark import first_row_after, run_engine
from measure import CpuWindow, TreeSampler, children_cpu_s, loadavg, reap_and_kill_leftovers
from static_site import ServedSite

from crawl_platform.bus.broker import (
    EMBEDDED_BUS_SETTINGS,
    EmbeddedBroker,
)
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from crawl_platform.urls import canonicalize
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.processes import DagsterProcesses
from crawl_platform_dagster.stack import create_lake

CRAWL_ID = "bench"
WRITER_POOL_LIMIT = 0  # steps of the crawl_duckdb_writer pool at once, 0: the instance's default (--writer-pool-limit)
DAEMON_READY_TIMEOUT_S = 90.0


@dataclass
class CrawlResult:
    crawler: str
    expected: int
    pages: int = 0  # distinct expected URLs landed / fetched
    rows: int = 0  # rows in `pages` (platform) or responses recorded (Scrapy)
    duplicates: list[str] = field(default_factory=list)  # URLs landed more than once
    missing: int = 0
    unexpected: int = 0
    wall_s: float = float("nan")  # seed submitted (or process started) -> crawl done
    first_page_s: float = float("nan")  # seed submitted -> first row in `pages` / first response
    cpu_window_s: float = float("nan")  # CPU of the crawler's processes during wall_s
    cpu_total_s: float = float("nan")  # ... from its first process started to its last one reaped
    peak_rss_mb: float = float("nan")  # summed over the crawler's processes, sampled every 0.5 s
    peak_pss_mb: float = float("nan")
    peak_processes: int = 0
    requests_served: int = 0  # what nginx logged while this crawler ran (robots.txt included)
    min_gap_ms: float = float("nan")  # smallest gap between two requests to one host, nginx's log
    hosts_too_close: int = 0  # hosts that saw two requests closer than the politeness delay
    max_fetch_gap_s: float = float("nan")  # platform: largest gap between consecutive `pages.fetched_at`
    visible_s: tuple[float, float] = (float("nan"), float("nan"))  # platform: fetch -> readable in the lake, p50, p95
    reader_reads: int = 0  # with --reader: the notebook's one-second reading transactions ...
    reader_errors: int = 0  # ... and how many of them failed
    completed: bool = False  # False: stopped at the time limit, the figures are a partial rate
    window: tuple[float, float] = (0.0, 0.0)  # epoch seconds of wall_s, for the Dagster event log
    load_before: str = ""
    load_after: str = ""
    notes: list[str] = field(default_factory=list)
    workdir: Path | None = None

    def politeness(self, site: ServedSite, offset: int, delay_ms: int) -> None:
        """From nginx's log since `offset`: each host's smallest gap between two page requests."""
        if site.nginx is None:
            return
        gaps = site.nginx.min_gaps_ms(offset)
        if gaps:
            self.min_gap_ms = min(gaps.values())
            # nginx logs arrival to the millisecond: a gap 1 ms short of the delay is the clock's
            self.hosts_too_close = sum(1 for gap in gaps.values() if gap < delay_ms - 1)

    @property
    def exactly_once(self) -> bool:
        return self.completed and not self.duplicates and not self.missing and not self.unexpected

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s if self.wall_s else float("nan")

    def check(self, counts: collections.Counter[str], expected: set[str]) -> None:
        self.rows = sum(counts.values())
        self.pages = len(set(counts) & expected)
        self.duplicates = sorted(u for u, n in counts.items() if n > 1)
        self.missing = len(expected - set(counts))
        self.unexpected = len(set(counts) - expected)


class _Measured:
    """CPU and memory of everything started inside the `with` block (the web server excluded)."""

    def __init__(self, result: CrawlResult, exclude: set[int]) -> None:
        self.result, self.exclude = result, exclude
        self.sampler = TreeSampler(exclude)
        self.window = CpuWindow(exclude)

    def __enter__(self) -> _Measured:
        self.result.load_before = loadavg()
        self.cpu0 = children_cpu_s()
        self.sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.stop()
        leftovers = reap_and_kill_leftovers(self.exclude)
        if leftovers:
            self.result.notes.append(f"stopped processes that outlived their parent: {', '.join(leftovers)}")
        self.result.cpu_total_s = children_cpu_s() - self.cpu0
        self.result.peak_rss_mb = self.sampler.peak_rss / 2**20
        self.result.peak_pss_mb = self.sampler.peak_pss / 2**20
        self.result.peak_processes = self.sampler.peak_processes
        self.result.load_after = loadavg()


def platform_settings(workdir: Path, bootstrap: str, batch_size: int, host_delay_ms: int) -> Settings:
    tag = uuid.uuid4().hex[:6]
    return Settings(
        kafka_bootstrap_servers=bootstrap, **EMBEDDED_BUS_SETTINGS,
        seeds_topic=f"seeds-{tag}", frontier_topic=f"frontier-{tag}", dead_letter_topic=f"dead-{tag}",
        lake_path=workdir / "lake", dagster_home=workdir / "dagster_home", handoff_dir=workdir / "handoff",
        batch_size=batch_size,
        host_delay_ms=host_delay_ms, allowed_networks=["127.0.0.0/8"],
    )


def first_row_while_running(store: CrawlStore, started: float, proc: subprocess.Popen[bytes],
                            timeout_s: float) -> float:
    """`first_row_after`, one second at a time, giving up as soon as `proc` has exited."""
    while proc.poll() is None and time.monotonic() - started < timeout_s:
        found = first_row_after(store, started, timeout=time.monotonic() - started + 1.0)
        if not math.isnan(found):
            return found
    return float("nan")


def wait_daemon_ready(log: Path, processes: DagsterProcesses, timeout_s: float) -> float:
    """Seconds until the daemon's log shows the sensors being evaluated (bounded by `timeout_s`)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if processes.dead():
            raise RuntimeError(f"Dagster exited during start-up; see {log}")
        if log.exists() and b"seeds_sensor" in log.read_bytes():
            return time.monotonic() - started
        time.sleep(0.25)
    return float("nan")


def crawl_with_platform(site: ServedSite, workdir: Path, mode: str, batch_size: int, host_delay_ms: int,
                        max_concurrent_runs: int, timeout_s: float, reader: bool = False,
                        recrawl: bool = False) -> CrawlResult:
    workdir.mkdir(parents=True)
    result = CrawlResult(f"platform ({mode}{', a reader holding the lake' if reader else ''})", len(site.expected),
                         workdir=workdir)
    exclude = {site.nginx.pid} if site.nginx and site.nginx.pid else set()
    offset = site.nginx.log_offset() if site.nginx else 0
    with _Measured(result, exclude) as measured, EmbeddedBroker(port=0) as broker:
        settings = platform_settings(workdir, broker.bootstrap_servers, batch_size, host_delay_ms)
        env = {**os.environ, **settings.to_env()}
        store = CrawlStore.from_settings(settings)
        if mode == "engine":
            _engine(result, measured, env, site, store, workdir, timeout_s)
        else:
            _dagster(result, measured, env, site, store, settings, workdir, max_concurrent_runs, timeout_s, reader,
                     recrawl)
        # Rows of pages that exist: a link to a file the site lacks (the Python docs link
        # whatsnew/changelog.html, which Debian's python3.11-doc does not ship) lands as its 404,
        # which Scrapy drops, and is no page of the site.
        rows = store.query("SELECT url FROM pages WHERE status < 400") if store.exists() else []
        if rows:  # the measure of a stalled crawl: the longest time nothing was fetched
            (gap,) = store.query("SELECT max(gap) FROM (SELECT epoch(fetched_at) - epoch(lag(fetched_at) "
                                 "OVER (ORDER BY fetched_at)) AS gap FROM pages)")[0]
            result.max_fetch_gap_s = float(gap or 0.0)
            result.visible_s = fetch_to_visible(store)
    result.check(collections.Counter(canonicalize(r[0]) for r in rows), site.expected)
    if site.nginx:
        result.requests_served = len(site.nginx.requests_since(offset))
    result.politeness(site, offset, host_delay_ms)
    return result


def fetch_to_visible(store: CrawlStore) -> tuple[float, float]:
    """p50 and p95 seconds from a page's fetch (``pages.fetched_at``) to the commit of the lake
    snapshot that added its row, when a reader first sees it."""
    ((last,),) = store.query("SELECT max(snapshot_id) FROM ducklake_snapshots(?)", [store.alias])
    ((p50, p95),) = store.query(
        "SELECT quantile_cont(epoch(s.snapshot_time) - epoch(c.fetched_at), 0.5), "
        "quantile_cont(epoch(s.snapshot_time) - epoch(c.fetched_at), 0.95) "
        "FROM ducklake_table_changes(?, 'main', 'pages', 0, ?) AS c "
        "JOIN ducklake_snapshots(?) AS s USING (snapshot_id) WHERE c.change_type = 'insert'",
        [store.alias, last, store.alias])
    return float(p50), float(p95)


def _engine(result: CrawlResult, measured: _Measured, env: dict[str, str], site: ServedSite, store: CrawlStore,
            workdir: Path, timeout_s: float) -> None:
    with (workdir / "engine.log").open("wb") as log:
        measured.window.start()
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, __file__, "engine", *site.seed_urls], env=env, cwd=REPO,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            result.first_page_s = first_row_while_running(store, started, proc, min(300.0, timeout_s))
            proc.wait(max(1.0, timeout_s - (time.monotonic() - started)))
            result.completed = proc.returncode == 0
        except subprocess.TimeoutExpired:
            result.notes.append(f"stopped after the {timeout_s:.0f} s limit")
        finally:
            _finish(proc, result, measured, started)


def _finish(proc: subprocess.Popen[Any], result: CrawlResult, measured: _Measured, started: float) -> None:
    """Stop ``proc`` if it still runs, then close the crawl's wall and CPU measurements."""
    if proc.poll() is None:
        proc.terminate()
        proc.wait(30)
    result.wall_s = time.monotonic() - started
    measured.window.stop()
    result.cpu_window_s = measured.window.seconds


def _lake_reader(settings: Settings, workdir: Path, exclude: set[int]) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """An analyst's notebook holding the lake open (tests/e2e/lake_reader.py, its own process, left
    out of the crawler's CPU and memory): attached read-only, reading in one-second transactions."""
    location = LakeLocation.from_settings(settings)
    stop, out = workdir / "reader.stop", workdir / "reader.json"
    log = (workdir / "reader.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "tests.e2e.lake_reader", str(location.sqlite_path),
                             location.data_path, str(stop), str(out)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    exclude.add(proc.pid)
    return proc, stop, out


def _dagster(result: CrawlResult, measured: _Measured, env: dict[str, str], site: ServedSite, store: CrawlStore,
             settings: Settings, workdir: Path, max_concurrent_runs: int, timeout_s: float,
             reader: bool = False, recrawl: bool = False) -> None:
    write_instance_yaml(settings.dagster_home, max_concurrent_runs=max_concurrent_runs,
                        partitions=settings.topic_partitions, writer_pool_limit=WRITER_POOL_LIMIT or None)
    create_lake(settings)  # as `crawl-platform up` does before Dagster starts
    dagster = DagsterProcesses(env, workdir / "logs", webserver_port=None, workspace=REPO / "workspace.yaml")
    try:
        dagster.start()
        ready = wait_daemon_ready(workdir / "logs" / "daemon.log", dagster, DAEMON_READY_TIMEOUT_S)
        result.notes.append(f"daemon start-up until the first sensor evaluation: {ready:.1f} s")
        # A warm stack, as the seed -> first row target says: the run fork server has imported
        # the definitions (7.8 s of imports on a slow machine, which the first run waited for).
        if not dagster.wait_warm(DAEMON_READY_TIMEOUT_S):
            result.notes.append("the run fork server did not say it was warm")
        time.sleep(2.5)  # one more sensor interval, so the seeds sensor is surely ticking
        notebook = _lake_reader(settings, workdir, measured.exclude) if reader else None
        with (workdir / "cli.log").open("wb") as log:
            measured.window.start()
            started, started_wall = time.monotonic(), time.time()
            argv = [sys.executable, "-m", "crawl_platform.cli.main", "crawl", *site.seed_urls, "--crawl-id", CRAWL_ID,
                    "--max-pages", str(10**7), "--max-depth", "100", "--wait", "--timeout", str(int(timeout_s))]
            proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
            try:
                result.first_page_s = first_row_while_running(store, started, proc, min(300.0, timeout_s))
                proc.wait(timeout_s + 60)
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(30)
            result.wall_s = time.monotonic() - started
            result.window = (started_wall, started_wall + result.wall_s)
            measured.window.stop()
            result.cpu_window_s = measured.window.seconds
            result.completed = proc.returncode == 0
            if not result.completed:
                result.notes.append(f"`crawl --wait` exited {proc.returncode} (time limit {timeout_s:.0f} s)")
        if recrawl and result.completed:
            _recrawl(result, measured.exclude, env, site, store, workdir, timeout_s)
        if notebook is not None:
            reader_proc, stop, out = notebook
            stop.touch()
            reader_proc.wait(120)
            seen = json.loads(out.read_text()) if out.exists() else {"reads": [], "errors": ["no report"]}
            result.reader_reads, result.reader_errors = len(seen["reads"]), len(seen["errors"])
            result.notes.append(f"the reader held the lake through the crawl: {result.reader_reads} one-second "
                                f"reads, {result.reader_errors} failed")
    finally:
        dagster.stop()


def _recrawl(result: CrawlResult, exclude: set[int], env: dict[str, str], site: ServedSite, store: CrawlStore,
             workdir: Path, timeout_s: float) -> None:
    """The same site again under another crawl id, on the same warm stack and lake (``compare.py
    --recrawl``): a note with its wall time, the platform's CPU, and the new versions it landed."""
    crawl_id = CRAWL_ID + "-again"
    window = CpuWindow(exclude)
    with (workdir / "cli-recrawl.log").open("wb") as log:
        window.start()
        started = time.monotonic()
        argv = [sys.executable, "-m", "crawl_platform.cli.main", "crawl", *site.seed_urls, "--crawl-id", crawl_id,
                "--max-pages", str(10**7), "--max-depth", "100", "--wait", "--timeout", str(int(timeout_s))]
        code = subprocess.run(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        wall = time.monotonic() - started
        window.stop()
    ((fetched,),) = store.query("SELECT count(*) FROM frontier WHERE crawl_id = ? AND state = 'fetched'", [crawl_id])
    ((new,),) = store.query("SELECT count(*) FROM pages WHERE crawl_id = ?", [crawl_id])
    result.notes.append(f"recrawl as {crawl_id!r}{'' if code == 0 else f' (exited {code})'}: {fetched} pages in "
                        f"{wall:.1f} s, CPU {window.seconds:.1f} s ({1000 * window.seconds / max(fetched, 1):.1f} ms "
                        f"a page), {new} new versions")


PEERS = {"Scrapy": "scrapy_spider.py", "Crawlee": "crawlee_spider.py"}
"""The crawlers the platform is compared with, each a script run as its own process."""


def crawl_with_peer(peer: str, site: ServedSite, workdir: Path, concurrency: int, timeout_s: float,
                    delay_ms: int = 0) -> CrawlResult:
    """One crawl of ``site`` by ``peer`` (a key of :data:`PEERS`), measured like the platform's."""
    workdir.mkdir(parents=True)
    result = CrawlResult(f"{peer} (per-host concurrency {concurrency})", len(site.expected), workdir=workdir)
    exclude = {site.nginx.pid} if site.nginx and site.nginx.pid else set()
    offset = site.nginx.log_offset() if site.nginx else 0
    urls, stats_file = workdir / "urls.txt", workdir / "stats.json"
    argv = [sys.executable, str(HERE / PEERS[peer]), "--start", *site.seed_urls, "--out", str(urls),
            "--stats", str(stats_file), "--concurrency", str(concurrency), "--timeout", str(int(timeout_s))]
    if peer == "Scrapy":
        argv += ["--delay", str(delay_ms / 1000)]
    with _Measured(result, exclude) as measured, (workdir / f"{peer.lower()}.log").open("wb") as log:
        measured.window.start()
        started, started_wall = time.monotonic(), time.time()
        proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout_s + 60)
        finally:
            _finish(proc, result, measured, started)
    stats: dict[str, Any] = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    result.completed = proc.returncode == 0 and stats.get("finish_reason") == "finished"
    if stats.get("first_page_at") is not None:  # from the process launch, interpreter start-up included
        result.first_page_s = float(stats["first_page_at"]) - started_wall
    lines = urls.read_text().split() if urls.exists() else []
    result.check(collections.Counter(canonicalize(u) for u in lines), site.expected)
    if result.duplicates and set(result.duplicates) <= set(site.seed_urls):
        result.notes.append("Scrapy fetched start URLs twice: start requests bypass its duplicate filter")
    if site.nginx:
        result.requests_served = len(site.nginx.requests_since(offset))
    result.politeness(site, offset, delay_ms)
    return result


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "engine":
        sys.exit("usage: crawlers.py engine SEED_URL...   (settings from the environment)")
    run_engine(Settings(), sys.argv[2:])
