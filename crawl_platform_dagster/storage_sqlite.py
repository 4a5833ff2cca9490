"""Dagster's SQLite instance storage (the embedded default), without a new engine per statement.

Dagster's SQLite storage creates a SQLAlchemy engine, and so a new SQLite connection, for every
statement (``NullPool``), and each time an instance is created it loads the alembic revision
scripts (Python files on disk) to check each database's schema. A code server creates an instance
per sensor evaluation, and the daemon reads and writes sensor state on every tick, so during a
crawl those checks would be a large share of the code server's CPU, and connecting and schema
reflection of the daemon's (see docs/benchmarks.md). :class:`PooledSqliteStorage` is the same
storage, on the same files, with one engine per database file per process (a small pool of open
connections, never shared with a forked child), the schema checks made once per process, and the
tables and indexes found remembered as :mod:`crawl_platform_dagster.storage` does on PostgreSQL.
SQLite's own locking (WAL, the busy timeout) still orders writers across processes.

``dagster.yaml`` selects it when the instance has no PostgreSQL
(:func:`crawl_platform_dagster.instance.write_instance_yaml`):

    storage:
      custom:
        module: crawl_platform_dagster.storage_sqlite
        class: PooledSqliteStorage
        config:
          base_dir: /abs/path/to/DAGSTER_HOME   # Dagster's own layout: history/, schedules/
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dagster import StringSource
from sqlalchemy.engine import Connection, Engine

from crawl_platform_dagster.dagster_internals import (
    ConfigurableClassData,
    DagsterSqliteStorage,
    SqliteEventLogStorage,
    SqliteRunStorage,
    SqliteScheduleStorage,
    create_db_conn_string,
    create_engine,
    event_logs_directory,
    runs_directory,
    schedule_directory,
)
from crawl_platform_dagster.storage import (
    POOL_SIZE,
    _EventLogSchemaMemo,
    _RunSchemaMemo,
    _ScheduleSchemaMemo,
)

SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a statement waits for another process's write lock (Dagster's own for event logs)."""
ENGINES_PER_PROCESS = 16
"""Database files a process keeps engines for; each run's events are a file of their own, so the
least recently used engine beyond this is closed."""

_ENGINES: OrderedDict[str, Engine] = OrderedDict()
_ENGINES_LOCK = threading.Lock()
_CHECKED: set[str] = set()
"""Database files whose schema this process checked (and created where missing)."""


def _engine(conn_string: str) -> Engine:
    """The process's engine for one SQLite file: :data:`POOL_SIZE` connections kept open, more
    opened (and closed after) when threads ask at once."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(conn_string)
        if engine is None:
            engine = _ENGINES[conn_string] = create_engine(
                conn_string, pool_size=POOL_SIZE, max_overflow=-1,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
            while len(_ENGINES) > ENGINES_PER_PROCESS:
                _ENGINES.popitem(last=False)[1].dispose()
        else:
            _ENGINES.move_to_end(conn_string)
        return engine


@contextmanager
def _transaction(conn_string: str) -> Iterator[Connection]:
    with _engine(conn_string).connect() as conn, conn.begin():
        yield conn


def _forget_pooled_connections() -> None:
    """In a forked child: the parent's open connections are the parent's; open new ones."""
    for engine in list(_ENGINES.values()):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_pooled_connections)


class _OneFileSqlite:
    """What the run and schedule storages share here (each is one SQLite file, ``_conn_string``):
    statements on the process's engine for the file, and its schema checked once per process."""

    _db_name: str  # the file's name in ``base_dir``: Dagster's own ("runs", "schedules")
    _conn_string: str

    @property
    def _memo_key(self) -> str:
        return self._conn_string

    @classmethod
    def from_local(cls, base_dir: str, inst_data: ConfigurableClassData | None = None) -> Any:
        conn_string = create_db_conn_string(base_dir, cls._db_name)
        if conn_string in _CHECKED:
            return cls(conn_string, inst_data)  # type: ignore[call-arg]  # the storage's (conn_string, inst_data)
        storage = super().from_local(base_dir, inst_data)  # type: ignore[misc]  # Dagster's: checks, creates
        _CHECKED.add(conn_string)
        return storage

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with _transaction(self._conn_string) as conn:
            yield conn


class _SqliteRunStorage(_OneFileSqlite, _RunSchemaMemo, SqliteRunStorage):  # type: ignore[override]
    _db_name = "runs"


class _SqliteScheduleStorage(_OneFileSqlite, _ScheduleSchemaMemo, SqliteScheduleStorage):  # type: ignore[override]
    _db_name = "schedules"


class _SqliteEventLogStorage(_EventLogSchemaMemo, SqliteEventLogStorage):
    """Events live in one file per run plus an index file; each file's schema is checked once per
    process (Dagster checks it once per storage object, and a code server makes one per sensor
    evaluation)."""

    @property
    def _memo_key(self) -> str:  # type: ignore[override]
        return self._base_dir

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            conn_string = self.conn_string_for_shard(shard)
            if conn_string not in _CHECKED:
                self._initdb(_engine(conn_string))
                _CHECKED.add(conn_string)
            with _transaction(conn_string) as conn:
                yield conn

    def wipe(self) -> None:
        with _ENGINES_LOCK:  # the files are deleted: nothing may stay open on them
            for conn_string in [c for c in _ENGINES if c.startswith(create_db_conn_string(self._base_dir, ""))]:
                _ENGINES.pop(conn_string).dispose()
                _CHECKED.discard(conn_string)
        super().wipe()


class PooledSqliteStorage(DagsterSqliteStorage):
    """Dagster's ``DagsterSqliteStorage`` on the same files, with
    an engine per file per process and the schema checked once per process."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        # DagsterSqliteStorage.__init__, with the storages above.
        self.base_dir = base_dir
        os.makedirs(base_dir, exist_ok=True)
        self._run_storage = _SqliteRunStorage.from_local(runs_directory(base_dir))
        self._event_log_storage = _SqliteEventLogStorage(event_logs_directory(base_dir))
        self._schedule_storage = _SqliteScheduleStorage.from_local(schedule_directory(base_dir))
        self._inst_data = inst_data
        super(DagsterSqliteStorage, self).__init__()  # type: ignore[no-untyped-call]  # as its __init__ ends

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None,
                          config_value: Mapping[str, Any]) -> PooledSqliteStorage:
        return cls(str(config_value["base_dir"]), inst_data=inst_data)

    @classmethod
    def config_type(cls) -> Any:
        return {"base_dir": StringSource}
