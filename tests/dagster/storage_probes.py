"""What the instance-storage tests share (test_pooled_storage.py on PostgreSQL, test_sqlite_storage.py
on SQLite): the statements sent while something runs, and what a code server does per sensor evaluation."""

from __future__ import annotations

from collections.abc import Callable

from dagster import DagsterInstance
from sqlalchemy import event
from sqlalchemy.engine import Engine


def statements_while(action: Callable[[], object], *markers: str) -> list[str]:
    """The statements any engine of this process sent during ``action()`` that contain one of ``markers``."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        if any(marker in statement for marker in markers):
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        action()
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    return seen


def a_sensor_evaluations_worth(home: str) -> None:
    """What a code server does per sensor evaluation: a new instance, a few reads of each storage."""
    with DagsterInstance.from_config(home) as instance:
        instance.all_instigator_state()
        instance.get_runs_count()
        instance.get_ticks("origin", "selector")
        instance.event_log_storage.has_secondary_index("asset_key_table")
