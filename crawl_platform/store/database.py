"""The DuckDB crawl store: connections, locking and the schema.

DuckDB lets one process open a file for writing, and while it does no other process can open
it at all. So every connection here is short: open, do one unit of work in one transaction,
close. Writers on this machine queue on an exclusive ``flock`` next to the database and readers
take a shared one, so nobody spins; anything that still meets DuckDB's own lock (another
machine, a foreign tool) is retried with backoff until ``lock_timeout_s``. The SQL of the crawl
itself lives in :mod:`crawl_platform.store.landing` and :mod:`crawl_platform.frontier.frontier`.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from crawl_platform.config import Settings


class StoreBusyError(RuntimeError):
    """The database stayed locked by another process for longer than the timeout."""


class CrawlStore:
    """Handle on the DuckDB file; cheap to create, holds no connection between calls."""

    def __init__(self, path: Path, lock_timeout_s: float = 120.0) -> None:
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        self._schema_ready = False

    @classmethod
    def from_settings(cls, settings: Settings) -> CrawlStore:
        return cls(settings.duckdb_path, settings.duckdb_lock_timeout_s)

    @contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection inside one transaction, committed on success, rolled back on error."""
        with self._connect(read_only=False) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection (the database is created first if it does not exist yet)."""
        if not self.path.exists():
            with self.write():
                pass
        with self._connect(read_only=True) as con:
            yield con

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.read() as con:
            return con.execute(sql, params or []).fetchall()

    def ensure_schema(self) -> None:
        with self.write():
            pass

    # --- internals ---------------------------------------------------------------------------
    @contextmanager
    def _connect(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        with self._file_lock(exclusive=not read_only, deadline=deadline):
            con = self._open(read_only, deadline)
            try:
                if not read_only and not self._schema_ready:
                    con.execute(resources.files("crawl_platform.store").joinpath("schema.sql").read_text())
                    self._schema_ready = True
                yield con
            finally:
                con.close()

    def _open(self, read_only: bool, deadline: float) -> duckdb.DuckDBPyConnection:
        pause = 0.01
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as err:
                if "lock" not in str(err).lower() or time.monotonic() > deadline:
                    raise StoreBusyError(f"{self.path} is locked by another process: {err}") from None
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    @contextmanager
    def _file_lock(self, exclusive: bool, deadline: float) -> Iterator[None]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a+") as handle:
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            pause = 0.005
            while True:
                try:
                    fcntl.flock(handle, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StoreBusyError(
                            f"{self.path} stayed busy for {self.lock_timeout_s:.0f}s (another writer)"
                        ) from None
                    time.sleep(pause)
                    pause = min(pause * 2, 0.2)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
