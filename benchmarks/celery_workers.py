"""Celery scale-out benchmark: the same local site crawled end to end through the real platform three times.

Modes, each with a fresh DuckDB file, fresh topics, a fresh Dagster home and a fresh PostgreSQL
database for the Dagster instance (the same storage everywhere, for a fair comparison):
  1. CRAWL_EXECUTOR=in_process  the single-machine default (batch steps in the run process),
  2. CRAWL_EXECUTOR=celery      with one `crawl-platform worker` process,
  3. CRAWL_EXECUTOR=celery      with two worker processes (each --worker-concurrency steps at once).

Each mode: CLI `crawl --wait` -> seeds topic -> Dagster daemon sensors -> batch runs -> DuckDB, on the
embedded broker; Celery on RabbitMQ (default) or Redis, both on this machine. Prints pages/s per
mode and a summary table. CPU s is this process tree (every child reaped, strays adopted as
subreaper); host CPU s is the whole machine's busy time (broker, PostgreSQL, RabbitMQ included).

    .venv/bin/python benchmarks/celery_workers.py --pages 600 --hosts 6
"""

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.crawl_benchmark import first_row_after
from crawl_platform.bus.broker import (
    EMBEDDED_BUS_SETTINGS,
    EmbeddedBroker,
)
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.processes import DagsterProcesses
from tests.conftest import fresh_postgres_database

BROKERS = {
    "rabbitmq": ("pyamqp://guest:guest@127.0.0.1:5672//", "rpc://"),
    "redis": ("redis://127.0.0.1:6379/5", "redis://127.0.0.1:6379/6"),
}
MODES = [("in_process", 0), ("celery", 1), ("celery", 2)]
STRAY_MARKERS = (b"dagster", b"celery", b"crawl_platform")


def host_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def stop_strays(pgids: set[int]) -> None:
    """SIGKILL what is left of the process groups we started (e.g. `dagster api grpc` servers) and any
    adopted dagster/celery orphan, then reap them so their CPU time is counted."""
    me, strays = os.getpid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (proc / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        pid, ppid, pgid = int(proc.name), int(stat[1]), int(stat[2])
        if pgid in pgids or (ppid == me and any(m in cmd for m in STRAY_MARKERS)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            strays.append((pid, ppid, cmd.replace(b"\0", b" ")[:100].decode(errors="replace") or "(exited)"))
    for pid, ppid, cmd in strays:
        print(f"  killed stray pid {pid}: {cmd}", flush=True)
        if ppid == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def load1() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def start_worker(env: dict[str, str], concurrency: int, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "crawl_platform.cli.main", "worker", "--concurrency",
                                 str(concurrency)], env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_ready(workers: list[subprocess.Popen], logs: list[Path], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for worker, log in zip(workers, logs, strict=True):
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited at start ({worker.returncode}): {log.read_text()[-3000:]}")
        if all(b" ready." in log.read_bytes() for log in logs):
            return
        time.sleep(0.5)
    print(f"  workers not reported ready after {timeout_s:.0f}s; going on (see {logs})", flush=True)


def run_mode(args: argparse.Namespace, executor: str, n_workers: int, broker: EmbeddedBroker,
             seeds: list[str], expected: set[str]) -> dict[str, object]:
    tag = uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix=f"celery-bench-{executor}-{n_workers}-"))
    celery_broker, celery_backend = BROKERS[args.celery_broker]
    settings = Settings(
        kafka_bootstrap_servers=broker.bootstrap_servers, **EMBEDDED_BUS_SETTINGS,
        seeds_topic=f"seeds-{tag}", frontier_topic=f"frontier-{tag}", dead_letter_topic=f"dead-{tag}",
        lake_path=tmp / "lake", dagster_home=tmp / "dagster_home", handoff_dir=tmp / "handoff",
        batch_size=args.batch_size, fetch_shards=args.fetch_shards, host_delay_ms=args.host_delay_ms,
        allowed_networks=["127.0.0.0/8"], executor=executor, celery_broker=celery_broker,
        celery_backend=celery_backend, celery_queue=f"crawl-bench-{tag}",
    )
    env = {**os.environ, **settings.to_env()}
    store = CrawlStore.from_settings(settings)
    print(f"\n== {executor} workers={n_workers} (dir {tmp}, load1 before {load1()})", flush=True)
    workers: list[subprocess.Popen] = []
    crawl: subprocess.Popen | None = None
    cpu0, host0 = tree_cpu_s(), host_busy_s()
    with fresh_postgres_database() as pg_url:
        write_instance_yaml(settings.dagster_home, postgres_url=pg_url, max_concurrent_runs=args.max_concurrent_runs,
                            partitions=settings.topic_partitions)
        dagster = DagsterProcesses(env, tmp / "logs", webserver_port=None, workspace=REPO / "workspace.yaml")
        try:
            pgids = {proc.pid for proc in dagster.start().processes.values()}
            logs = [tmp / "logs" / f"worker{i}.log" for i in range(n_workers)]
            workers = [start_worker(env, args.worker_concurrency, log) for log in logs]
            pgids |= {worker.pid for worker in workers}
            wait_ready(workers, logs)
            time.sleep(8)  # daemon warm-up: sensors start ticking
            if dagster.dead():
                raise RuntimeError(f"the Dagster daemon exited at start; see {tmp / 'logs'}")
            started = time.monotonic()
            crawl = subprocess.Popen([sys.executable, "-m", "crawl_platform.cli.main", "crawl", *seeds, "--crawl-id",
                                      f"bench-{tag}", "--max-pages", str(10**7), "--max-depth", "100", "--wait",
                                      "--timeout", str(args.timeout)], env=env, cwd=REPO,
                                     stdout=subprocess.DEVNULL, start_new_session=True)
            pgids.add(crawl.pid)
            first = first_row_after(store, started, timeout=args.timeout)
            while (rc := crawl.poll()) is None:
                if dagster.dead():  # e.g. someone's `pkill -f dagster-daemon` on this shared machine
                    raise RuntimeError(f"the Dagster daemon exited during the crawl; see {tmp / 'logs'}")
                time.sleep(0.5)
            wall = time.monotonic() - started
        finally:
            for proc in [*workers, *([crawl] if crawl else [])]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            dagster.stop()
            for proc in [*workers, *([crawl] if crawl else [])]:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            stop_strays(pgids)
    urls = [row[0] for row in store.query("SELECT url FROM pages")]
    result = {"mode": executor, "workers": n_workers, "landed": len(set(urls)), "rows": len(urls),
              "expected": len(expected), "exactly_once": sorted(urls) == sorted(expected) and rc == 0,
              "wall": wall, "first": first, "cpu": tree_cpu_s() - cpu0, "host_cpu": host_busy_s() - host0}
    print(f"  crawl rc={rc} landed={result['landed']}/{len(expected)} rows={len(urls)} wall_s={wall:.1f} "
          f"pages_per_s={result['landed'] / wall:.1f} first_row_s={first:.1f} load1 after {load1()}", flush=True)
    if args.celery_broker == "rabbitmq" and executor == "celery":
        with contextlib.suppress(Exception):  # leave no empty queue behind in RabbitMQ
            from kombu import Connection  # noqa: PLC0415

            with Connection(celery_broker) as conn:
                conn.default_channel.queue_delete(settings.celery_queue)
    return result


def main() -> None:
    # SIGTERM becomes SystemExit, so the daemon, workers and servers started below are stopped too.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    # Orphans of our children (Celery pool processes, Dagster code servers) are re-parented to us.
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--hosts", type=int, default=6, help="serve the pages from this many hosts (ports)")
    parser.add_argument("--celery-broker", choices=sorted(BROKERS), default="rabbitmq")
    parser.add_argument("--worker-concurrency", type=int, default=1, help="steps at once per Celery worker")
    parser.add_argument("--batch-size", type=int, default=Settings().batch_size, help="CRAWL_BATCH_SIZE (0: auto)")
    parser.add_argument("--fetch-shards", type=int, default=0, help="CRAWL_FETCH_SHARDS (0: auto, 4 on celery)")
    parser.add_argument("--host-delay-ms", type=int, default=0)
    parser.add_argument("--max-concurrent-runs", type=int, default=4)
    parser.add_argument("--timeout", type=int, default=1800, help="per mode, seconds")
    args = parser.parse_args()
    print("command:", " ".join([os.path.relpath(sys.executable), *sys.argv]))
    print(f"cpu_count={os.cpu_count()} load1={load1()} celery_broker={BROKERS[args.celery_broker][0]}", flush=True)

    sites = [DemoSite(n_pages=max(2, args.pages // args.hosts), seed=1 + i) for i in range(args.hosts)]
    results = []
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(port=0))
        servers = [stack.enter_context(site.serve()) for site in sites]
        expected = set().union(*(site.expected_urls(server.base_url) for site, server in zip(sites, servers,
                                                                                          strict=True)))
        seeds = [server.base_url + "/" for server in servers]
        print(f"{len(servers)} hosts, {len(expected)} pages expected", flush=True)
        for executor, n_workers in MODES:
            results.append(run_mode(args, executor, n_workers, broker, seeds, expected))

    print(f"\nsummary (cpu_count={os.cpu_count()}, worker concurrency {args.worker_concurrency}, "
          f"celery broker {args.celery_broker}, batch_size {args.batch_size or 'auto'})")
    header = f"{'mode':<11}{'workers':>8}{'landed/exp':>12}{'exactly-once':>14}{'wall s':>9}{'pages/s':>9}"
    print(header + f"{'tree CPU s':>12}{'host CPU s':>12}{'1st row s':>11}")
    for r in results:
        print(f"{r['mode']:<11}{r['workers']:>8}{str(r['landed']) + '/' + str(r['expected']):>12}"
              f"{'yes' if r['exactly_once'] else 'no':>14}{r['wall']:>9.1f}{r['landed'] / r['wall']:>9.1f}"
              f"{r['cpu']:>12.1f}{r['host_cpu']:>12.1f}{r['first']:>11.1f}")


if __name__ == "__main__":
    main()
