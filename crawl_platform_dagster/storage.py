"""Dagster's PostgreSQL instance storage, holding its connections open.

``dagster-postgres`` opens a new connection for every statement in every process except the
webserver (SQLAlchemy's ``NullPool``): each sensor tick, run-queue pass, run event and heartbeat
pays a TCP connect, PostgreSQL's authentication and a new server backend process. A batch run
stores dozens of events, and the daemon polls several times a second, so connecting becomes a
noticeable share of a run's CPU, with as much again in PostgreSQL forking backends (see
docs/benchmarks.md). :class:`PooledPostgresStorage` is the same storage with one small
pool per process: connections are checked with a ping before use (a restarted PostgreSQL costs a
reconnect, not an error), replaced after :data:`POOL_RECYCLE_S`, and never shared with a forked
child (the pool forgets its connections in the child). A process holds at most :data:`POOL_SIZE`
connections while idle, however many instances it creates.

It also remembers, per process, the parts of the schema it has found. Dagster asks PostgreSQL's
catalog whether a table, column or index migration exists before most statements (the schedule
storage before every sensor tick's reads and writes, each new instance three times as it starts),
and a code server creates an instance per sensor evaluation: on an idle stack with a sensor pass a
second, those catalog queries would be most of the daemon's and the code server's CPU (see
docs/benchmarks.md). Only what was found is remembered: a table or index a later
migration adds is seen as soon as it exists.

``dagster.yaml`` selects it as custom storage (:func:`crawl_platform_dagster.instance.write_instance_yaml`):

    storage:
      custom:
        module: crawl_platform_dagster.storage
        class: PooledPostgresStorage
        config:
          postgres_url: postgresql+psycopg2://...

Its config is ``storage: postgres:``'s own (``postgres_url``, or ``postgres_db`` with its fields).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.event_log import PostgresEventLogStorage
from dagster_postgres.run_storage import PostgresRunStorage
from dagster_postgres.schedule_storage import PostgresScheduleStorage
from dagster_postgres.utils import create_pg_engine, get_token_provider_from_config, pg_url_from_config
from sqlalchemy.engine import Engine

from crawl_platform_dagster.dagster_internals import ConfigurableClassData

POOL_SIZE = 2
"""Connections a process keeps open to the instance's database, shared by its run, event-log and
schedule storage and by every DagsterInstance it creates (a code server creates one per sensor
evaluation, a Celery worker one per task)."""
POOL_RECYCLE_S = 1800
"""A connection older than this is replaced when next checked out."""

_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()
_PRESENT: set[tuple[str, str]] = set()
"""(database URL, schema part) found in this process: "tables" once the storages' tables were
checked, or a probe's name and argument."""


def _present(postgres_url: str, part: str, probe: Callable[[], bool]) -> bool:
    """``probe()``, asked until it is first true for ``part`` of the database at ``postgres_url``."""
    key = (postgres_url, part)
    if key in _PRESENT:
        return True
    found = bool(probe())
    if found:
        _PRESENT.add(key)
    return found


def _shared_engine(postgres_url: str, token_provider: Any) -> Engine:
    """The process's engine for ``postgres_url``. Beyond its :data:`POOL_SIZE` open connections,
    threads asking at once get connections of their own, closed when they give them back (as
    Dagster's ``NullPool`` does for every statement)."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(postgres_url)
        if engine is None:
            engine = _ENGINES[postgres_url] = create_pg_engine(
                postgres_url, token_provider, isolation_level="AUTOCOMMIT", pool_size=POOL_SIZE,
                max_overflow=-1, pool_recycle=POOL_RECYCLE_S, pool_pre_ping=True)
        return engine


def _forget_pooled_connections() -> None:
    """In a forked child: the parent's pooled connections are the parent's; open new ones."""
    for engine in list(_ENGINES.values()):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_pooled_connections)


class _RunSchemaMemo:
    """Run storage remembering the columns, tables and indexes it found, per database (``_memo_key``)."""

    _memo_key: str

    def has_built_index(self, migration_name: str) -> bool:
        return _present(self._memo_key, f"index {migration_name}", partial(super().has_built_index, migration_name))  # type: ignore[misc]

    def has_run_stats_index_cols(self) -> bool:
        return _present(self._memo_key, "runs stats columns", super().has_run_stats_index_cols)  # type: ignore[misc]

    def has_bulk_actions_selector_cols(self) -> bool:
        return _present(self._memo_key, "bulk_actions selector", super().has_bulk_actions_selector_cols)  # type: ignore[misc]

    def has_backfill_id_column(self) -> bool:
        return _present(self._memo_key, "runs backfill_id", super().has_backfill_id_column)  # type: ignore[misc]

    def has_bulk_action_job_name_column(self) -> bool:
        return _present(self._memo_key, "bulk_actions job_name", super().has_bulk_action_job_name_column)  # type: ignore[misc]

    def has_backfill_tags_table(self) -> bool:
        return _present(self._memo_key, "backfill_tags", super().has_backfill_tags_table)  # type: ignore[misc]


class _EventLogSchemaMemo:
    """Event log storage remembering the columns and indexes it found."""

    _memo_key: str

    def has_secondary_index(self, name: str) -> bool:
        return _present(self._memo_key, f"event index {name}", partial(super().has_secondary_index, name))  # type: ignore[misc]

    def _has_asset_key_col_on_connection(self, conn: Any, column_name: str) -> bool:
        return _present(self._memo_key, f"asset_keys {column_name}",
                        partial(super()._has_asset_key_col_on_connection, conn, column_name))  # type: ignore[misc]


class _ScheduleSchemaMemo:
    """Schedule storage remembering the tables and indexes it found: it asks before nearly every
    statement."""

    _memo_key: str

    def has_instigators_table(self) -> bool:
        return _present(self._memo_key, "instigators", super().has_instigators_table)  # type: ignore[misc]

    def _has_instigators_table(self, conn: Any) -> bool:
        return _present(self._memo_key, "instigators", partial(super()._has_instigators_table, conn))  # type: ignore[misc]

    def _has_asset_daemon_asset_evaluations_table(self, conn: Any) -> bool:
        return _present(self._memo_key, "asset_daemon_asset_evaluations",
                        partial(super()._has_asset_daemon_asset_evaluations_table, conn))  # type: ignore[misc]

    def has_secondary_index_table(self) -> bool:
        return _present(self._memo_key, "secondary_indexes", super().has_secondary_index_table)  # type: ignore[misc]

    def has_built_index(self, migration_name: str) -> bool:
        return _present(self._memo_key, f"schedule index {migration_name}",
                        partial(super().has_built_index, migration_name))  # type: ignore[misc]


class _RunStorage(_RunSchemaMemo, PostgresRunStorage):
    """Dagster's PostgreSQL run storage, remembering the schema it found."""

    @property
    def _memo_key(self) -> str:  # type: ignore[override]
        return self.postgres_url


class _EventLogStorage(_EventLogSchemaMemo, PostgresEventLogStorage):
    """Dagster's PostgreSQL event log storage, remembering the schema it found."""

    @property
    def _memo_key(self) -> str:  # type: ignore[override]
        return self.postgres_url


class _ScheduleStorage(_ScheduleSchemaMemo, PostgresScheduleStorage):
    """Dagster's PostgreSQL schedule storage, remembering the schema it found."""

    @property
    def _memo_key(self) -> str:  # type: ignore[override]
        return self.postgres_url


class PooledPostgresStorage(DagsterPostgresStorage):
    """:class:`dagster_postgres.DagsterPostgresStorage` with one connection pool per process, and
    the schema it found remembered."""

    def __init__(self, postgres_url: str, should_autocreate_tables: bool = True,
                 inst_data: ConfigurableClassData | None = None, token_provider: Any = None) -> None:
        # DagsterPostgresStorage.__init__, with the storages above, and the check that creates missing
        # tables (three catalog queries on new connections) made once per process.
        self.postgres_url = postgres_url
        self.should_autocreate_tables = should_autocreate_tables
        self._inst_data = inst_data
        autocreate = should_autocreate_tables and (postgres_url, "tables") not in _PRESENT
        self._run_storage = _RunStorage(postgres_url, autocreate, token_provider=token_provider)
        self._event_log_storage = _EventLogStorage(postgres_url, autocreate, token_provider=token_provider)
        self._schedule_storage = _ScheduleStorage(postgres_url, autocreate, token_provider=token_provider)
        super(DagsterPostgresStorage, self).__init__()  # type: ignore[no-untyped-call]  # as its __init__ ends
        _PRESENT.add((postgres_url, "tables"))
        engine = _shared_engine(postgres_url, token_provider)
        for storage in (self._run_storage, self._event_log_storage, self._schedule_storage):
            storage._engine.dispose()  # the NullPool engine it made holds nothing open
            storage._engine = engine  # as optimize_for_webserver does

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None,
                          config_value: Mapping[str, Any]) -> PooledPostgresStorage:
        return cls(inst_data=inst_data, postgres_url=pg_url_from_config(config_value),
                   should_autocreate_tables=config_value.get("should_autocreate_tables", True),
                   token_provider=get_token_provider_from_config(config_value))
