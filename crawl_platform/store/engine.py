"""The DuckDB under the store: the process's one in-memory instance, and what runs on its cursors.

Every lake a process opens is attached to one in-memory DuckDB (:func:`process_engine`), so the
DuckLake and catalog extensions load once per process, with the memory limit and threads of the
first store opened. :func:`new_engine` is a DuckDB configured the same way for callers that need
one of their own (copying a lake, warming a process before it forks). The rest are what every
cursor on such an instance does: a transaction, the current snapshot, a data path in object
storage made reachable. Kept apart from :mod:`crawl_platform.store.database` because these act
on a bare DuckDB connection and know no :class:`~crawl_platform.store.database.CrawlStore`.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from crawl_platform.store.errors import StoreUnavailableError
from crawl_platform.store.errors import one_line as _one_line
from crawl_platform.store.extensions import load_extensions, load_object_storage
from crawl_platform.store.location import LakeLocation

ENGINE_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False, "autoload_known_extensions": False,
    "python_enable_replacements": False,
    # The lake's extensions are loaded without hashing them again once their signature was checked
    # (crawl_platform.store.extensions); nothing is ever installed from elsewhere than their wheels.
    "allow_unsigned_extensions": True,
}

_ENGINE: duckdb.DuckDBPyConnection | None = None
_ENGINE_KINDS: set[str] = set()
_ENGINE_LOCK = threading.Lock()


def new_engine() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB as the store opens it: no extension is fetched or loaded behind our
    back, and a table name never silently resolves to a Python variable of the caller (data is
    handed over with register())."""
    return duckdb.connect(config=ENGINE_CONFIG)


def process_engine(catalog_kind: str, memory_limit: str | None = None, threads: int = 0) -> duckdb.DuckDBPyConnection:
    """The process's one in-memory DuckDB, with DuckLake and the catalog drivers loaded once
    (loading them costs a few hundred milliseconds). Every lake is attached to it.

    ``memory_limit`` (``CRAWL_LAKE_MEMORY_LIMIT``, set by the first store opened) bounds it.
    DuckDB's own default is 80 % of the machine's memory, so each run process would keep what it
    had read of the lake. The default limit lowers the platform's peak memory on a long crawl at
    no cost in speed, where a much lower one costs pages per second (see docs/benchmarks.md). A
    query that needs more spills to a folder of this process's own under the system's temporary
    folder."""
    global _ENGINE  # noqa: PLW0603 - one DuckDB per process, created on first use
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = new_engine()
            if threads > 0:
                _ENGINE.execute(f"SET threads = {int(threads)}")
            if memory_limit:
                _ENGINE.execute(f"SET memory_limit = '{memory_limit}'")  # a size, as Settings checks it
                spill = Path(tempfile.gettempdir()) / f"crawl-platform-duckdb-{os.getpid()}"
                _ENGINE.execute(f"SET temp_directory = '{str(spill).replace(chr(39), chr(39) * 2)}'")
        if catalog_kind not in _ENGINE_KINDS:
            load_extensions(_ENGINE, catalog_kind)
            _ENGINE_KINDS.add(catalog_kind)
        return _ENGINE


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One transaction on ``con``: committed when the block ends, rolled back when it raises."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def use_object_storage(con: duckdb.DuckDBPyConnection, location: LakeLocation) -> None:
    """Make ``con`` reach the data path of ``location`` when it is in object storage: ``httpfs``
    loaded from its wheel, the server's certificate checked, the store's secret created (from the
    settings, never from run config). Nothing for a local data path."""
    statements = location.object_storage_sql()
    if not statements:
        return
    try:
        load_object_storage(con)
        for sql in statements:
            con.execute(sql)
    except duckdb.Error as err:
        raise StoreUnavailableError(f"cannot reach the lake's data path {location.data_path}: "
                                    f"{_one_line(str(err))}") from None


def current_snapshot(con: duckdb.DuckDBPyConnection, alias: str) -> int:
    """The latest snapshot of the lake attached as ``alias`` (0 for none)."""
    row = con.execute(f"SELECT id FROM {alias}.current_snapshot()").fetchone()
    return int(row[0]) if row else 0
