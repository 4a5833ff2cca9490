"""The DuckDB store's write lock across processes (crawl_platform.store.database): readers and writers wait
for another process, and a lock held too long is a clear StoreBusyError."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from crawl_platform.store.database import CrawlStore, StoreBusyError
from tests.unit.crawl_rows import crawl_request, frontier_rows

_HOLD_WRITE = textwrap.dedent(
    """
    import sys, time
    import duckdb
    con = duckdb.connect(sys.argv[1])
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    con.close()
    """
)


def _hold_write_lock(path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_WRITE, str(path), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_reader_waits_for_another_process_holding_the_write_lock(store):
    holder = _hold_write_lock(store.path, 1.0)
    try:
        started = time.monotonic()
        assert store.query("SELECT count(*) FROM crawls") == [(0,)]
        waited = time.monotonic() - started
    finally:
        holder.wait(10)
    assert waited >= 0.5  # it really waited for the other process, then succeeded


def test_writer_waits_for_another_process_holding_the_write_lock(store, frontier):
    holder = _hold_write_lock(store.path, 1.0)
    try:
        started = time.monotonic()
        frontier.register(crawl_request("c1", "http://a.example/"))
        waited = time.monotonic() - started
    finally:
        holder.wait(10)
    assert waited >= 0.5
    assert len(frontier_rows(store, "c1")) == 1


def test_store_busy_error_when_the_lock_outlasts_the_timeout(store):
    impatient = CrawlStore(store.path, lock_timeout_s=0.1)
    holder = _hold_write_lock(store.path, 0.6)
    try:
        started = time.monotonic()
        with pytest.raises(StoreBusyError) as caught:
            impatient.query("SELECT count(*) FROM crawls")
        assert time.monotonic() - started < 0.5
    finally:
        holder.wait(10)
    assert str(store.path) in str(caught.value)
