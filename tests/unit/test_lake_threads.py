"""How many threads the DuckDB of each kind of process gets: one for the crawl (CRAWL_LAKE_THREADS),
one per core for `crawl-platform sql`. Each case runs in a subprocess, because a process keeps
the DuckDB its first store opened."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb
import pytest

from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore

THREADS_PROBE = """
import sys
from crawl_platform.cli.main import main
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
if sys.argv[2] == "cli":
    main(["status"])  # the CLI opens the lake first, as `crawl --wait` does
store = CrawlStore.from_settings(Settings(lake_path=sys.argv[1]))
print(store.query("SELECT current_setting('threads')")[0][0])
"""


@pytest.mark.parametrize(("opener", "setting", "expected"), [
    ("cli", None, 1), ("run", None, 1), ("run", "2", 2), ("run", "0", "per core"), ("cli", "0", 1),
])
def test_the_crawl_opens_the_lake_on_one_duckdb_thread_unless_told_otherwise(tmp_path, opener, setting, expected):
    """The crawl's statements are small: one DuckDB thread does them with less CPU, and the crawls
    are faster (see docs/benchmarks.md). CRAWL_LAKE_THREADS changes it for runs and
    sensors (0: one per core); the CLI's status reads stay on one."""
    lake = tmp_path / "lake"
    CrawlStore.from_settings(Settings(lake_path=lake)).ensure_schema()  # a lake for `status` to read
    env = {**os.environ, "CRAWL_LAKE_PATH": str(lake)}
    env.pop("CRAWL_LAKE_THREADS", None)
    if setting is not None:
        env["CRAWL_LAKE_THREADS"] = setting
    done = subprocess.run([sys.executable, "-c", THREADS_PROBE, str(lake), opener], env=env,
                          capture_output=True, text=True, check=True, timeout=120)
    threads = int(done.stdout.strip().splitlines()[-1])
    assert threads == (duckdb_default_threads() if expected == "per core" else expected)


def test_sql_queries_the_lake_on_every_core(tmp_path):
    """`crawl-platform sql` is for an analyst's scans: its own DuckDB, one thread per core."""
    lake = tmp_path / "lake"
    CrawlStore.from_settings(Settings(lake_path=lake)).ensure_schema()
    env = {**os.environ, "CRAWL_LAKE_PATH": str(lake), "CRAWL_LAKE_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "crawl_platform.cli.main", "sql", "--csv", "-c",
                           "SELECT current_setting('threads') AS threads"], env=env,
                          capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["threads", str(duckdb_default_threads())]


def duckdb_default_threads() -> int:
    con = duckdb.connect()
    try:
        return int(con.execute("SELECT current_setting('threads')").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()
