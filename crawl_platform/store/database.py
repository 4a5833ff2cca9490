"""The crawl store: a DuckLake lakehouse (a catalog database plus Parquet data files) seen through DuckDB.

Readers never wait: every read runs in its own snapshot of the lake, whatever writers are doing,
and writers never wait for readers. Writers take turns on a lake-wide write lock (a ``flock``
next to an embedded SQLite catalog, a PostgreSQL advisory lock on a shared one), so each write
transaction starts from the latest snapshot and the crawl's invariants (a URL admitted once per
crawl, one ``(url, version)`` per page, no lost state change) hold with any number of writer
processes on any number of machines; DuckLake itself settles commits that still race. Every
write transaction is one DuckLake snapshot, whose id :meth:`CrawlStore.write` reports.

The DuckLake and catalog extensions come from their PyPI wheels (:mod:`crawl_platform.store.extensions`),
never from the network. A process keeps one attached DuckDB instance per lake and gives each call
its own cursor; that DuckDB and what runs on a bare cursor of it are :mod:`crawl_platform.store.engine`'s,
and the catalog as found before attaching is :mod:`crawl_platform.store.catalog`'s. The SQL of the
crawl itself lives in the store's table modules (:mod:`crawl_platform.store.pages`,
:mod:`crawl_platform.store.frontier` and their neighbours), each function taking the cursor of a
:meth:`CrawlStore.read` or :meth:`CrawlStore.write`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from crawl_platform.config import Settings
from crawl_platform.storage import Folder, LocalFolder, open_folder
from crawl_platform.store.catalog import postgres_catalog_ready, prepare_sqlite_catalog, sqlite_catalog_ready
from crawl_platform.store.engine import current_snapshot, process_engine, transaction, use_object_storage
from crawl_platform.store.errors import StoreUnavailableError, scrubbed_errors
from crawl_platform.store.errors import one_line as _one_line
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.locks import advisory_lock, file_lock
from crawl_platform.store.schema import schema_upgrade

DEFAULT_MEMORY_LIMIT: str = Settings.model_fields["lake_memory_limit"].default
DEFAULT_THREADS: int = Settings.model_fields["lake_threads"].default


class CrawlStore:
    """Handle on the lake; cheap to create. The DuckDB instance that attaches it is opened on
    first use and kept for the life of this object (one per process in practice)."""

    def __init__(self, location: LakeLocation, write_timeout_s: float = 120.0,
                 archive: Folder | None = None, memory_limit: str | None = DEFAULT_MEMORY_LIMIT,
                 threads: int = DEFAULT_THREADS) -> None:
        self.location = location
        self.memory_limit = memory_limit  # DuckDB's, for the process's engine (see process_engine)
        self.threads = threads  # DuckDB's threads, for the process's engine (0: one per core)
        # Where the fetch steps write WARC files (``pages.warc_file`` is relative to it): a local
        # folder or object storage.
        self.archive: Folder = archive or location.archive_folder()
        self.write_timeout_s = write_timeout_s
        self._db: duckdb.DuckDBPyConnection | None = None
        self.alias = f"lake_{next(_ALIASES)}"  # this process attaches each lake under its own name
        self._open_lock = threading.Lock()
        self._write_lock = threading.Lock()  # threads of this process take turns too
        self._last = threading.local()

    @classmethod
    def from_settings(cls, settings: Settings, *, threads: int | None = None) -> CrawlStore:
        """The process's store for the lake the settings name: one attached DuckDB instance per
        lake and process, however many components ask (attaching costs tens of milliseconds).
        ``threads``: DuckDB's threads in this process, if it is the first to open a lake (0: one
        per core; None: ``CRAWL_LAKE_THREADS``, 1 by default). The crawl's statements are small,
        and on them DuckDB's threads cost more than they save: a status read takes more CPU on
        one thread per core than on one, and with one thread in every process the crawls are
        faster for less CPU (see docs/benchmarks.md)."""
        if threads is None:
            threads = settings.lake_threads
        location = LakeLocation.from_settings(settings)
        with _SHARED_LOCK:
            store = _SHARED.get(location)
            if store is None:
                store = _SHARED[location] = cls(location, settings.lake_write_timeout_s,
                                                location.archive_folder(settings.archive_path),
                                                memory_limit=settings.lake_memory_limit, threads=threads)
            return store

    @property
    def archive_root(self) -> Path:
        """The archive's folder on this machine; a :class:`ValueError` when it is in object
        storage (read and write it through :attr:`archive`)."""
        path = self.archive.local_path
        if path is None:
            raise ValueError(f"the archive {self.archive.url} is in object storage, not a local folder")
        return path

    @archive_root.setter
    def archive_root(self, path: Path) -> None:
        self.archive = LocalFolder(path)

    def exists(self) -> bool:
        """True once the lake has been created (an embedded catalog file exists); a shared
        catalog is assumed to exist."""
        path = self.location.sqlite_path
        return path is None or path.exists()

    @contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One write transaction (one snapshot), committed on success, rolled back on error.
        Waits for the lake's write lock, up to ``write_timeout_s``; afterwards
        :attr:`last_snapshot_id` is the snapshot it committed."""
        instance = self._instance()
        with scrubbed_errors(self.location), self._write_lock, self._lake_write_lock():
            con = instance.cursor()
            try:
                with transaction(con):
                    self._use_lake(con)
                    yield con
                self._last.snapshot_id = current_snapshot(con, self.alias)
            finally:
                con.close()

    @contextmanager
    def exclusive(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor holding the lake's write lock outside any transaction: each statement commits
        on its own. For DuckLake's maintenance calls (:mod:`crawl_platform.store.maintenance`),
        which must not share one transaction: a file cleanup inside it would delete files before
        the commit that stops referencing them. Readers still never wait."""
        instance = self._instance()
        with scrubbed_errors(self.location), self._write_lock, self._lake_write_lock():
            con = instance.cursor()
            try:
                self._use_lake(con)
                yield con
            finally:
                con.close()

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor reading one consistent snapshot of the lake (never waits for writers)."""
        con = self._instance().cursor()
        try:
            with scrubbed_errors(self.location):
                con.execute("BEGIN TRANSACTION")
                try:
                    self._use_lake(con)
                    yield con
                finally:
                    con.execute("ROLLBACK")
        finally:
            con.close()

    @property
    def last_snapshot_id(self) -> int | None:
        """The snapshot this thread's latest :meth:`write` committed (None before any)."""
        value = getattr(self._last, "snapshot_id", None)
        return int(value) if value is not None else None

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.read() as con:
            return con.execute(sql, params or []).fetchall()

    def ensure_schema(self) -> None:
        self._instance()

    def snapshot_id(self) -> int:
        """The lake's latest snapshot."""
        with self.read() as con:
            return current_snapshot(con, self.alias)

    def lake_write_lock(self) -> contextlib.AbstractContextManager[None]:
        """The lake-wide write lock alone, for a writer on a DuckDB connection of its own
        (``crawl-platform sql --write``), so its statements take turns with the crawl's writes."""
        return self._lake_write_lock()

    def close(self) -> None:
        """Detach the lake from the process's DuckDB."""
        with self._open_lock:
            if self._db is not None:
                self._db.execute(f"DETACH {self.alias}")
                self._db = None

    # --- internals ---------------------------------------------------------------------------
    def _use_lake(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make this lake the default catalog of ``con``, a connection of its own to the process's
        DuckDB. :meth:`read` and :meth:`write` call it inside their transaction: ``USE`` outside one
        is a DuckLake transaction of its own, a snapshot lookup in the catalog, which every read or
        write of a table would pay again (measured by ``benchmarks/lake_reads.py``)."""
        con.execute(f"USE {self.alias}")
        con.execute("SET enable_progress_bar = false")  # a long query must not draw on the caller's stdout

    def _instance(self) -> duckdb.DuckDBPyConnection:
        with self._open_lock:
            if self._db is None:
                self._db = self._open()
            return self._db

    def _open(self) -> duckdb.DuckDBPyConnection:
        location = self.location
        if location.is_local:
            data = Path(location.data_path)
            try:
                data.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreUnavailableError(f"cannot create the lake's data path {data}: {err.strerror}") from None
            if not _writable(data):
                raise StoreUnavailableError(f"the lake's data path {data} is not writable")
        else:
            _check_object_storage(location)
        engine = process_engine(location.kind, self.memory_limit, self.threads)
        use_object_storage(engine, location)
        # An existing lake opens without waiting for anyone. A new one (or one whose creation did
        # not finish) is created under the lake-wide write lock: processes opening a new lake at
        # once would otherwise each create DuckLake's catalog tables and all but one fail.
        if self._catalog_ready():
            with contextlib.suppress(_LakeNotReadyError, duckdb.Error):
                self._attach(engine, create=False)
                return engine
        with self._write_lock, self._lake_write_lock():
            try:
                self._attach(engine, create=True)
            except duckdb.Error as err:
                message = _one_line(f"cannot open the lake {location.catalog}: {err}")
                raise StoreUnavailableError(location.scrub(message)) from None
        return engine

    def _attach(self, engine: duckdb.DuckDBPyConnection, create: bool) -> None:
        """Attach the lake under this store's alias. With ``create`` (under the lake's write lock)
        a missing lake or schema is created; without it, a lake lacking its schema raises
        :class:`_LakeNotReadyError`. Whatever fails leaves the alias detached."""
        sqlite_path = self.location.sqlite_path
        if create and sqlite_path is not None:
            prepare_sqlite_catalog(sqlite_path)
        con = engine.cursor()
        try:
            try:
                con.execute(self.location.attach_sql(alias=self.alias))
            except duckdb.Error as err:
                # A lake whose catalog holds its data path spelt another way (relative, say) names
                # the same folder differently: open it with ours, if it is the same folder.
                if not self.location.same_data_path(str(err)):
                    raise
                con.execute(self.location.attach_sql(alias=self.alias, override_data_path=True))
            con.execute(f"USE {self.alias}")
            upgrade = schema_upgrade(con, self.alias)
            if upgrade:
                if not create:
                    raise _LakeNotReadyError
                # One transaction: a new lake starts with one snapshot holding every table, and an
                # older lake gains the columns added since in one snapshot.
                con.execute("BEGIN TRANSACTION")
                for sql in upgrade:
                    con.execute(sql)
                con.execute("COMMIT")
        except BaseException:
            # Attached but not ready: detach, or every later call of this store fails on its alias
            # being taken.
            for sql in ("ROLLBACK", "USE memory", f"DETACH DATABASE IF EXISTS {self.alias}"):
                with contextlib.suppress(duckdb.Error):
                    con.execute(sql)
            raise
        finally:
            con.close()

    def _catalog_ready(self) -> bool:
        """True when the catalog already holds a DuckLake (so attaching it creates nothing)."""
        sqlite_path = self.location.sqlite_path
        if sqlite_path is not None:
            return sqlite_catalog_ready(sqlite_path)
        return postgres_catalog_ready(self.location)

    @contextmanager
    def _lake_write_lock(self) -> Iterator[None]:
        deadline = time.monotonic() + self.write_timeout_s
        sqlite_path = self.location.sqlite_path
        if sqlite_path is not None:
            try:
                sqlite_path.parent.mkdir(parents=True, exist_ok=True)  # the lock sits next to the catalog
            except OSError as err:
                raise StoreUnavailableError(f"the lake catalog {sqlite_path} cannot be opened: {err}") from None
            with file_lock(sqlite_path.with_name(sqlite_path.name + ".write.lock"), deadline, self.write_timeout_s):
                yield
        else:
            with advisory_lock(self.location.catalog.split(":", 1)[1], deadline, self.write_timeout_s):
                yield


_ALIASES = itertools.count(1)
_SHARED: dict[LakeLocation, CrawlStore] = {}
_SHARED_LOCK = threading.Lock()


def _writable(path: Path) -> bool:
    probe = path / f".write-probe-{threading.get_ident()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        return False
    return True


def _check_object_storage(location: LakeLocation) -> None:
    """Write and remove a probe object under a data path in object storage: a bucket that does
    not exist, credentials it refuses or an endpoint out of reach is one line before anything
    is attached (DuckDB would say so only at the first Parquet file, mid-transaction)."""
    folder = open_folder(location.data_path, location.object_store)
    probe = f".write-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        folder.put_bytes(probe, b"")
        folder.delete(probe)
    except OSError as err:
        raise StoreUnavailableError(f"the lake's data path {location.data_path} cannot be written: "
                                    f"{_one_line(str(err))}") from None


class _LakeNotReadyError(Exception):
    """The catalog holds no complete lake yet: open it again under the write lock."""
