"""Dagster's PostgreSQL instance storage, holding its connections open.

``dagster-postgres`` opens a new connection for every statement in every process except the
webserver (SQLAlchemy's ``NullPool``): each sensor tick, run-queue pass, run event and heartbeat
pays a TCP connect, PostgreSQL's authentication and a new server backend process. A batch run
stores about forty events, and the daemon polls several times a second, so on the crawl's 2-core
machine connecting was about a tenth of a run's CPU, with as much again in PostgreSQL forking
backends (docs/benchmarks.md). :class:`PooledPostgresStorage` is the same storage with one small
pool per process: connections are checked with a ping before use (a restarted PostgreSQL costs a
reconnect, not an error), replaced after :data:`POOL_RECYCLE_S`, and never shared with a forked
child (the pool forgets its connections in the child). A process holds at most :data:`POOL_SIZE`
connections while idle, however many instances it creates.

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
from collections.abc import Mapping
from typing import Any

from dagster._core.storage.config import pg_config
from dagster._serdes import ConfigurableClassData
from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.utils import create_pg_engine, get_token_provider_from_config, pg_url_from_config
from sqlalchemy.engine import Engine

POOL_SIZE = 2
"""Connections a process keeps open to the instance's database, shared by its run, event-log and
schedule storage and by every DagsterInstance it creates (a code server creates one per sensor
evaluation, a Celery worker one per task)."""
POOL_RECYCLE_S = 1800
"""A connection older than this is replaced when next checked out."""

_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


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


class PooledPostgresStorage(DagsterPostgresStorage):
    """:class:`dagster_postgres.DagsterPostgresStorage` with one connection pool per process."""

    def __init__(self, postgres_url: str, should_autocreate_tables: bool = True,
                 inst_data: ConfigurableClassData | None = None, token_provider: Any = None) -> None:
        super().__init__(postgres_url, should_autocreate_tables, inst_data, token_provider)
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

    @classmethod
    def config_type(cls) -> Any:
        return pg_config()
